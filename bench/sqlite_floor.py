"""Instructions per SQLite add: bunq, a raw apsw insert into bunq's schema, litequeue.

    python bench/sqlite_floor.py   # needs valgrind, and the peers' venv (peers.py --setup)
    python bench/sqlite_floor.py --case bunq_w1 --n 500   # one case, run directly (no valgrind)

Wall-clock rates on a shared 2-core machine move by 2x between rounds; instruction counts
(``valgrind --tool=callgrind``) do not. Each case runs twice under callgrind, with
``--lo`` and ``--hi`` operations, and the figure is the difference divided by the
difference of operations, so start-up and imports cancel out. The count covers user
space (Python, apsw, SQLite, msgpack); the kernel's share (WAL writes, file locks) is
not in it. Cases:

- ``bunq_w1`` / ``bunq_w2``: ``Queue.add`` one by one / ``Queue.add_bulk`` of 1,000 on
  ``sqlite:///`` (WAL, synchronous=NORMAL);
- ``raw_w1`` / ``raw_w2``: apsw inserts of the same row into bunq's own schema (its table,
  indexes and counter triggers), one per transaction / 1,000 per transaction;
- ``raw_w1_no_counters``: the same without the counter trigger (what counts cost);
- ``raw_w1_autocommit``: ``raw_w1``'s insert as one autocommit statement (no BEGIN and
  COMMIT statements: SQLite's implicit transaction, as litequeue's ``put`` runs);
- ``raw_w1_intake`` / ``raw_w2_intake``: bunq's own intake statement (schema v3: the
  narrow table plain adds write, the id checked against ``jobs``), one autocommit
  insert per job / 1,000 per transaction, with no bunq code: the floor of bunq's adds;
- ``raw_w2_pack``: bunq's pack of 1,000 (schema v4: a bulk's rows as one msgpack row,
  its range checked first), one per transaction, with no bunq code: the floor of its bulks;
- ``litequeue_w1`` / ``litequeue_w2``: ``LiteQueue.put`` one by one / 1,000 per
  explicit transaction (as ``bench/peers_side.py`` runs them), in the peers' venv.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PEERS_PY = Path.home() / ".cache/bunq-bench-peers/bin/python"
PAYLOAD = {
    "user": 12345,
    "email": "someone@example.com",
    "template": "welcome-v2",
    "pad": "x" * 40,
}  # fmt: skip  (bench/workloads.py's)
CASES = ("bunq_w1", "raw_w1", "raw_w1_no_counters", "raw_w1_autocommit", "raw_w1_intake",
         "litequeue_w1", "bunq_w2", "raw_w2", "raw_w2_intake", "raw_w2_pack",
         "litequeue_w2")  # fmt: skip


def run_case(case: str, n: int) -> None:
    """Do ``n`` operations of ``case`` in a fresh file (this process: under callgrind)."""
    d = tempfile.mkdtemp(prefix="bunq-floor-")
    if case.startswith("litequeue"):
        run_litequeue(case, n, d)
        return
    sys.path.insert(0, str(ROOT))
    if case.startswith("bunq"):
        run_bunq(case, n, d)
    else:
        run_raw(case, n, d)


def run_litequeue(case: str, n: int, d: str) -> None:
    from litequeue import LiteQueue

    q = LiteQueue(f"{d}/lq.db")
    blob = json.dumps(PAYLOAD)
    if case == "litequeue_w1":
        for _ in range(n):
            q.put(blob)
        return
    for _ in range(n // 1000):
        q.conn.execute("BEGIN IMMEDIATE")
        for _ in range(1000):
            q.put(blob)
        q.conn.execute("COMMIT")


def run_bunq(case: str, n: int, d: str) -> None:
    from bunq import Queue, connect

    queue = Queue("floor", connect(f"sqlite:///{d}/bunq.db"))
    if case == "bunq_w1":
        for _ in range(n):
            queue.add("job", PAYLOAD)
        return
    batch = [("job", PAYLOAD)] * 1000
    for _ in range(n // 1000):
        queue.add_bulk(batch)


def run_raw(case: str, n: int, d: str) -> None:
    from raw_latency import job_row  # bench/, on the path as this script's folder

    from bunq import connect
    from bunq.codec import options_blob, pack
    from bunq.job import DEFAULT_OPTIONS

    backend: Any = connect(f"sqlite:///{d}/raw.db")
    conn = backend._conn()
    if case == "raw_w1_no_counters":
        conn.execute("DROP TRIGGER jobs_counted_ins")
    cur, sql = conn.cursor(), backend._sql["insert_job"]
    data, opts = pack(PAYLOAD, "data", 1 << 20), options_blob(DEFAULT_OPTIONS)

    def row(i: int) -> dict[str, Any]:
        return job_row(i, data, opts)

    if case.endswith("_intake"):  # bunq's intake (what a plain add writes), no bunq code
        sql, named = backend._sql["intake_put"], row
        row = lambda i: tuple(named(i).values())  # noqa: E731  (positional, INSERT_COLS order)
    if case == "raw_w2_pack":
        run_packs(backend, row, n)
        return
    if case == "raw_w1_intake":
        for i in range(n):
            cur.execute(sql, row(i))
        return
    if case == "raw_w1_autocommit":  # one statement, its own transaction (as litequeue's put)
        for i in range(n):
            cur.execute(sql, row(i))
        return
    if case in ("raw_w2", "raw_w2_intake"):
        for b in range(n // 1000):
            cur.execute("BEGIN IMMEDIATE")
            cur.executemany(sql, [row(b * 1000 + i) for i in range(1000)])
            cur.execute("COMMIT")
        return
    for i in range(n):
        cur.execute("BEGIN IMMEDIATE")
        cur.execute(sql, row(i))
        cur.execute("COMMIT")


def run_packs(backend: Any, row: Any, n: int) -> None:
    """bunq's pack of a bulk (schema v4), no bunq code: 1,000 rows as one msgpack row."""
    import msgpack

    cur = backend._conn().cursor()
    for b in range(n // 1000):
        rows = [tuple(row(b * 1000 + i).values()) for i in range(1000)]
        blob = msgpack.packb(rows, use_bin_type=True)
        cur.execute("BEGIN IMMEDIATE")
        span = {"lo": rows[0][0], "hi": rows[-1][0]}
        cur.execute(backend._sql["pack_clash"], span).fetchall()
        cur.execute(backend._sql["pack_put"], {**span, "n": 1000, "rows": blob})
        cur.execute("COMMIT")


def instructions(case: str, n: int) -> int:
    py = str(PEERS_PY) if case.startswith("litequeue") else sys.executable
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", py, __file__,
         "--case", case, "--n", str(n)],
        capture_output=True, text=True, check=True)  # fmt: skip
    m = re.search(r"refs:\s*([\d,]+)", out.stderr)
    assert m, out.stderr[-2000:]
    return int(m.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--case", choices=CASES)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--only", default=",".join(CASES))
    args = ap.parse_args()
    if args.case:
        run_case(args.case, args.n)
        os._exit(0)  # no close: its checkpoint would blur the difference
    out: dict[str, Any] = {}
    for case in args.only.split(","):
        lo, hi = (300, 1300) if "w1" in case else (2000, 7000)
        per = (instructions(case, hi) - instructions(case, lo)) / (hi - lo)
        out[case] = round(per)
        print(f"{case}: {per:,.0f} instructions per job", file=sys.stderr, flush=True)
    lq1, lq2 = out.get("litequeue_w1"), out.get("litequeue_w2")
    ratios = {}
    for case, lq in (("bunq_w1", lq1), ("raw_w1", lq1), ("raw_w1_no_counters", lq1),
                     ("raw_w1_autocommit", lq1), ("raw_w1_intake", lq1),
                     ("bunq_w2", lq2), ("raw_w2", lq2), ("raw_w2_intake", lq2),
                     ("raw_w2_pack", lq2)):  # fmt: skip
        if lq and case in out:
            ratios[f"{case} vs litequeue (litequeue's instructions / these)"] = round(
                lq / out[case], 2
            )
    print(json.dumps({"instructions_per_job": out, "ratios": ratios}, indent=2))


if __name__ == "__main__":
    main()
