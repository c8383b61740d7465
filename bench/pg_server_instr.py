"""Server instructions per PostgreSQL plain add, counted by callgrind: exact, not timed.

    python bench/pg_server_instr.py [--tree DIR ...] [--small 100] [--large 600]

Wall clock and CPU time on a shared VM drift by 2x within minutes (docs/performance.md),
too much to tell a 10 % change in the server's work from noise. This counts it:

1. a scratch cluster (``initdb`` in a temporary directory, run by the ``postgres`` user
   when this runs as root) on a free port; each tree (this one, and every ``--tree``)
   creates its schema there through ``connect()`` and adds one job;
2. each tree writes its plain-add statement as ``PREPARE`` and ``EXECUTE`` lines, with
   fresh rows as ``Queue.add("job", PAYLOAD)`` builds them (``bench/pg_w1.py``);
3. for ``--small`` and ``--large`` executions, a fresh copy of the stopped cluster runs
   them in single-user mode (``postgres --single``, each EXECUTE its own transaction,
   ``fsync=off``) under ``valgrind --tool=callgrind``; the difference of the two totals
   over ``large - small`` is the instructions of one add;
4. where the tree appends counts (schema v3), the same with its ``fold_deltas`` after
   the large run: the fold's instructions per delta it moved (``close()`` folded the
   tree's first add, so the large run's are all there is).

Prints one JSON object: per tree, instructions per add, per folded delta, and the sum.
Needs valgrind and PostgreSQL's server binaries (``pg_config --bindir``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

# Run by this script in a child per tree: writes the statements for n adds to `out`.
CHILD = r"""
import sys
tree, dsn, schema, out, sizes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
sys.path.insert(0, sys.argv[6])
from use_tree import use_tree
use_tree(tree or None)
from psycopg import connect as pg
from psycopg.sql import Literal
from bunq import Queue, connect
from bunq.backends.sql.pgplain import numbered
from pg_w1 import row_maker
b = connect(f"{dsn}?schema={schema}")
row = row_maker(b, Queue("w1", b))
text, tail = numbered(b._insert_sql(1)), b._insert_tail
with pg(dsn) as c:
    for n in map(int, sizes.split(",")):
        with open(f"{out}_{n}.sql", "w") as f:
            f.write(f"PREPARE p AS {text};\n\n")
            for _ in range(n):
                vals = ", ".join(Literal(v).as_string(c) for v in [*row(), *tail])
                f.write(f"EXECUTE p({vals});\n\n")
fold = b._sql.get("fold_deltas")
if fold:
    open(f"{out}_fold.sql", "w").write(fold.replace("%%", "%") + ";\n\n")
b.close()
"""


def bindir() -> Path:
    out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
    if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").exists():
        return Path(out.stdout.strip())
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        sys.exit("no PostgreSQL server binaries (initdb) found")
    return found[-1].parent


def as_pg(cmd: str) -> list[str]:
    """``cmd`` in a shell, as the postgres user when this runs as root."""
    return ["su", "postgres", "-c", cmd] if os.geteuid() == 0 else ["sh", "-c", cmd]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def counted(bin_: Path, data: Path, pristine: Path, sql: list[Path]) -> int:
    """Instructions of a single-user server running the ``sql`` files in order, on a
    fresh copy of ``pristine``."""
    subprocess.run(as_pg(f"rm -rf {data} && cp -a {pristine} {data}"), check=True)
    files = " ".join(str(p) for p in sql)
    cmd = (f"cat {files} | valgrind --tool=callgrind --callgrind-out-file=/dev/null"
           f" {bin_}/postgres --single -j -D {data} -c fsync=off test")  # fmt: skip
    done = subprocess.run(as_pg(cmd), capture_output=True, text=True)
    m = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if not m or re.search(r"\b(ERROR|FATAL|PANIC):", done.stdout + done.stderr):
        sys.exit(f"single-user run failed: {(done.stdout + done.stderr)[-800:]}")
    return int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", default=[], help="another tree to count")
    ap.add_argument("--small", type=int, default=100)
    ap.add_argument("--large", type=int, default=600)
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("needs valgrind")
    bin_ = bindir()
    work = Path(tempfile.mkdtemp(prefix="bunq-instr-"))
    os.chmod(work, 0o755)
    pristine, data = work / "pristine", work / "data"
    pristine.mkdir()
    if os.geteuid() == 0:
        shutil.chown(pristine, "postgres")
        shutil.chown(work, "postgres")
    port = free_port()
    subprocess.run(as_pg(f"{bin_}/initdb -D {pristine} -A trust -U postgres"),
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run(as_pg(f"{bin_}/pg_ctl -D {pristine} -o '-p {port} -k {work}'"
                         f" -l {work}/log -w start"), check=True, capture_output=True)  # fmt: skip
    trees = {"this": "", **{Path(t).name or t: t for t in args.tree}}
    try:
        dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        make = f"import psycopg; psycopg.connect({dsn!r}, autocommit=True).execute(%r)"
        subprocess.run([sys.executable, "-c", make % "CREATE DATABASE test"], check=True)
        dsn = dsn.rsplit("/", 1)[0] + "/test"
        for i, (name, tree) in enumerate(trees.items()):
            subprocess.run([sys.executable, "-c", CHILD, tree, dsn, f"s{i}", str(work / name),
                            f"{args.small},{args.large}", str(BENCH)], check=True)  # fmt: skip
    finally:
        subprocess.run(as_pg(f"{bin_}/pg_ctl -D {pristine} -w stop"), capture_output=True)
    for p in work.glob("*.sql"):
        p.chmod(0o644)
    out: dict[str, Any] = {"small": args.small, "large": args.large, "trees": {}}
    span = args.large - args.small
    t0 = time.time()
    for name in trees:
        small, large = (work / f"{name}_{n}.sql" for n in (args.small, args.large))
        per_add = (counted(bin_, data, pristine, [large])
                   - counted(bin_, data, pristine, [small])) / span  # fmt: skip
        res: dict[str, Any] = {"per_add": round(per_add)}
        fold = work / f"{name}_fold.sql"
        if fold.exists():
            moved = (counted(bin_, data, pristine, [large, fold])
                     - counted(bin_, data, pristine, [large])) / args.large  # fmt: skip
            res["fold_per_delta"] = round(moved)
            res["per_add_with_fold"] = round(per_add + moved)
        out["trees"][name] = res
    out["seconds"] = round(time.time() - t0)
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
