"""Both bunq SQLite files under a writer that never pauses: rate, WAL, file; prints JSON.

    python bench/wal.py [--bulks 50] [--rounds 5] [--tree DIR]

For the SQLite backend (``sqlite:///``) and the memory engine's data file
(``memory://?data=``, what ``bunq serve`` writes): ``--bulks`` calls of ``add_bulk``
of 1,000 jobs (the engine's each committed by ``sync()``), timed; then the WAL's
high-water mark in pages and, after close, the file's bytes per job. Two modes:
``shipped`` (the tree as it is) and ``deferred`` (the checkpoint thread's hint does
nothing, so no checkpoint runs until the file closes: the SQLite backend before
session 11, whose checkpoint thread copied nothing back). Interleaved rounds,
medians. ``--tree`` measures another checkout (``bench/use_tree.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

KINDS = ("sqlite", "memory")
MODES = ("shipped", "deferred")


def one(kind: str, mode: str, bulks: int) -> dict[str, Any]:
    from workloads import PAYLOAD

    from bunq import Queue, connect

    if mode == "deferred":
        try:
            from bunq.checkpoint import Checkpointer as Cls
        except ImportError:  # a tree before session 11
            from bunq.backends.sql.sqlite import _Checkpointer as Cls  # type: ignore
        Cls.hint = lambda self, conn, db, pages: 0  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="bunq-wal-") as d:
        path = f"{d}/wal.db"
        b: Any = connect(f"sqlite:///{path}" if kind == "sqlite" else f"memory://?data={path}")
        q = Queue("wal", b)
        batch = [("job", PAYLOAD)] * 1000
        t = time.perf_counter()
        for _ in range(bulks):
            q.add_bulk(batch)
            if kind == "memory":
                b.sync()
        dt = time.perf_counter() - t
        wal = os.path.getsize(path + "-wal") // 4096
        b.close()
        return {"per_s": round(bulks * 1000 / dt), "wal_pages": wal,
                "file_bytes_per_job": round(os.path.getsize(path) / (bulks * 1000))}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bulks", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tree")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # kind mode
    args = ap.parse_args()
    if args.one:
        from use_tree import use_tree

        use_tree(args.tree)
        import bunq  # noqa: F401  (first: workloads puts this checkout on sys.path)

        print(json.dumps(one(*args.one, args.bulks)))
        return
    runs: dict[str, list[dict[str, Any]]] = {f"{k} {m}": [] for k in KINDS for m in MODES}
    for _ in range(args.rounds):
        for key in runs:
            cmd = [sys.executable, __file__, "--one", *key.split(), "--bulks", str(args.bulks)]
            if args.tree:
                cmd += ["--tree", args.tree]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            runs[key].append(json.loads(out.strip().splitlines()[-1]))
    print(json.dumps({key: {f: statistics.median(r[f] for r in rs) for f in rs[0]}
                      for key, rs in runs.items()}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
