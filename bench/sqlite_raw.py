"""Raw apsw reference rates on this machine (what bunq's SQLite figures sit beside).

    python bench/sqlite_raw.py

Inserts of one ~100-byte row per transaction at synchronous NORMAL and FULL
(WAL), rows per second in transactions of 1,000, and claims of 100 rows per
UPDATE. Prints JSON.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import apsw


def fresh(sync: str) -> apsw.Connection:
    path = os.path.join(tempfile.mkdtemp(), "raw.db")
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={sync}")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, state INTEGER, data BLOB)")
    conn.execute("CREATE INDEX t_state ON t (state, id)")
    return conn


def one_per_tx(sync: str, n: int) -> float:
    conn, blob = fresh(sync), b"x" * 100
    t = time.perf_counter()
    for _ in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (state, data) VALUES (0, ?)", (blob,))
        conn.execute("COMMIT")
    return n / (time.perf_counter() - t)


def batched(n: int) -> tuple[float, float]:
    conn, blob = fresh("NORMAL"), b"x" * 100
    t = time.perf_counter()
    for _ in range(n // 1000):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO t (state, data) VALUES (0, ?)", [(blob,)] * 1000)
        conn.execute("COMMIT")
    ins = n / (time.perf_counter() - t)
    t = time.perf_counter()
    claimed = 0
    while True:
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute("UPDATE t SET state = 1 WHERE id IN (SELECT id FROM t WHERE state = 0"
                            " ORDER BY id LIMIT 100) RETURNING id").fetchall()  # fmt: skip
        conn.execute("COMMIT")
        if not rows:
            break
        claimed += len(rows)
    return ins, claimed / (time.perf_counter() - t)


if __name__ == "__main__":
    ins, claims = batched(100_000)
    print(
        json.dumps(
            {
                "insert_one_per_tx_normal": round(one_per_tx("NORMAL", 50_000)),
                "insert_one_per_tx_full": round(one_per_tx("FULL", 3_000)),
                "insert_tx_of_1000_normal": round(ins),
                "claim_100_per_update_rows": round(claims),
            },
            indent=2,
        )
    )
