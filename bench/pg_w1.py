"""Where a PostgreSQL single add (W1) spends its time: bunq's add beside its parts.

    python bench/pg_w1.py [--dsn ...] [-n 1000] [--rounds 3] [--tree DIR]
    python bench/pg_w1.py --once 600     # n adds, untimed: for valgrind --tool=callgrind

Interleaved cases, each n single-row autocommit statements (one WAL flush each) in a
fresh schema; medians of the rounds: wall µs per call, the server backend's CPU µs per
call (``/proc/<pid>/schedstat``: only with a local server), this process's CPU µs per
call (every thread: the client's part) and WAL bytes per call.

- ``rawt``: a 3-column table (raw_pg's row in bench/peers.py), the commit's floor;
- ``jobs``: bunq's row into bunq's jobs table, counter triggers disabled, no NOTIFY;
- ``jobs-partial``: the same into a copy of the table with only its primary key and the
  claim index (none of the six partial indexes of the sweeps and listings);
- ``jobs+notify``: the same through the plain-add statement, triggers disabled, the
  NOTIFY forced (a listener holds the bell);
- ``jobs+trigger``: bunq's row with the counter trigger, no NOTIFY;
- ``statement``: the plain-add statement through psycopg's ``execute`` (trigger, no
  listener);
- ``statement, libpq``: the same statement as bunq sends it, prepared and run through
  libpq by ``bunq/backends/sql/pgplain.py`` (not in a ``--tree`` from before it);
- ``Queue.add``: the whole call.

Instructions per add of the client: run ``--once`` under callgrind at two sizes and
divide the difference (``valgrind --tool=callgrind --callgrind-out-file=/dev/null
python bench/pg_w1.py --once 600``, then 100).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from use_tree import use_tree

DSN = "postgresql://postgres@127.0.0.1:5432/test"
PAYLOAD = {"user": 12345, "email": "someone@example.com", "template": "welcome-v2",
           "pad": "x" * 40}  # fmt: skip


RAWT = "INSERT INTO rawt (state, data) VALUES (0, %s)"
Timing = tuple[float, float | None, float, float]  # wall µs, server CPU µs (None: remote),
# WAL B, client CPU µs (this process, every thread)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", default=os.environ.get("BUNQ_PG_DSN", DSN))
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tree")
    ap.add_argument("--once", type=int, help="n adds, untimed (for callgrind)")
    args = ap.parse_args()
    use_tree(args.tree)
    import psycopg

    from bunq import Queue, connect

    schema = f"bunq_w1_{uuid.uuid4().hex[:8]}"
    backend: Any = connect(f"{args.dsn}{'&' if '?' in args.dsn else '?'}schema={schema}")
    try:
        q = Queue("w1", backend)
        for _ in range(20):
            q.add("job", PAYLOAD)
        if args.once:
            for _ in range(args.once):
                q.add("job", PAYLOAD)
            return
        with psycopg.connect(args.dsn, autocommit=True) as raw:
            parts(args, backend, q, raw, schema)
    finally:
        backend.close()
        with psycopg.connect(args.dsn, autocommit=True) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def parts(args: Any, backend: Any, q: Any, raw: Any, schema: str) -> None:
    from bunq.backends.sql.queries import INSERT_COLS

    raw.execute(f'SET search_path = "{schema}"')
    raw.execute("CREATE TABLE rawt (id BIGSERIAL PRIMARY KEY, state SMALLINT NOT NULL,"
                " data BYTEA NOT NULL)")  # fmt: skip
    raw.execute("CREATE INDEX rawt_state ON rawt (state, id)")
    raw.execute("CREATE TABLE jobs_np (LIKE jobs INCLUDING DEFAULTS)")
    raw.execute("ALTER TABLE jobs_np ADD PRIMARY KEY (id)")
    raw.execute("CREATE INDEX jobs_np_queue ON jobs_np (queue, state, priority DESC, ord_at, seq)")
    row = row_maker(backend, q)
    # (a tree from before session 14 keeps the statements in a dict filled by the adds)
    stmt = backend._insert_sql(1) if hasattr(backend, "_insert_sql") else backend._insert_sqls[1]
    plain = (f"INSERT INTO jobs ({', '.join(INSERT_COLS)})"
             f" VALUES ({', '.join(['%s'] * len(INSERT_COLS))})")  # fmt: skip
    plain_np = plain.replace("INTO jobs ", "INTO jobs_np ")

    def tail() -> list[Any]:
        return list(backend._insert_tail)

    try:
        from bunq.backends.sql.pgplain import PlainInsert

        libpq = PlainInsert(lambda n: stmt).run
    except ImportError:  # a tree from before session 14
        libpq = None
    bell = psycopg_listener(args.dsn, backend._bell)
    cases: dict[str, tuple[Callable[[], Any], bool, bool]] = {  # fn, triggers on, bell held
        "rawt": (lambda: raw.execute(RAWT, (b"x" * 100,)), True, False),
        "jobs": (lambda: raw.execute(plain, row()), False, False),
        "jobs-partial": (lambda: raw.execute(plain_np, row()), False, False),
        "jobs+notify": (lambda: raw.execute(stmt, [*row(), *tail()]), False, True),
        "jobs+trigger": (lambda: raw.execute(plain, row()), True, False),
        "statement": (lambda: raw.execute(stmt, [*row(), *tail()]), True, False),
        "statement, libpq": (lambda: libpq(raw, 1, [*row(), *tail()]), True, False),
        "Queue.add": (lambda: q.add("job", PAYLOAD), True, False),
    }
    if libpq is None:
        del cases["statement, libpq"]
    conn = backend._checkout()  # the connection the adds use (the spare, after one)
    bunq_pid = conn.info.backend_pid
    backend._release(conn)
    res: dict[str, list[Timing]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for name, (fn, triggers, held) in cases.items():
            raw.execute(f"ALTER TABLE jobs {'ENABLE' if triggers else 'DISABLE'} TRIGGER USER")
            bell(held)
            pid = bunq_pid if name == "Queue.add" else raw.info.backend_pid
            res[name].append(timed(fn, args.n, raw, pid))
    raw.execute("ALTER TABLE jobs ENABLE TRIGGER USER")
    bell(False)
    report("case", res)


def row_maker(backend: Any, q: Any) -> Callable[[], list[Any]]:
    """Fresh rows (``INSERT_COLS`` values, a new id each) as bunq builds one for
    ``q.add("job", PAYLOAD)``."""
    from bunq.backends.sql.pgconn import insert_row
    from bunq.job import new_job_id

    rows: list[dict[str, Any]] = []
    real = backend._insert  # one row as bunq builds it
    backend._insert = lambda cur, r: (rows.append(dict(r[0])), real(cur, r))[1]
    q.add("job", PAYLOAD)
    backend._insert = real
    return lambda: [new_job_id(), *insert_row(rows[0])[1:]]


def timed(fn: Callable[[], Any], n: int, raw: Any, pid: int) -> Timing:
    """``fn`` n times (after 10 untimed): per call, the wall time, backend ``pid``'s CPU
    and the WAL written (read on ``raw``)."""
    for _ in range(10):
        fn()
    s0, w0, c0, t0 = cpu_ns(pid), wal(raw), time.process_time(), time.perf_counter()
    for _ in range(n):
        fn()
    dt, c1, w1, s1 = time.perf_counter() - t0, time.process_time(), wal(raw), cpu_ns(pid)
    cpu = None if s0 is None or s1 is None else (s1 - s0) / n / 1000
    return dt / n * 1e6, cpu, (w1 - w0) / n, (c1 - c0) / n * 1e6


def report(label: str, res: dict[str, list[Timing]]) -> None:
    """One line per case: the medians of its rounds."""
    print(f"{label:17s} {'wall µs':>8s} {'server CPU µs':>14s} {'client CPU µs':>14s}"
          f" {'WAL B':>6s}")  # fmt: skip
    for name, r in res.items():
        cpus = [x[1] for x in r if x[1] is not None]
        cpu = f"{statistics.median(cpus):14.0f}" if cpus else f"{'-':>14s}"
        print(f"{name:17s} {statistics.median(x[0] for x in r):8.0f} {cpu}"
              f" {statistics.median(x[3] for x in r):14.0f}"
              f" {statistics.median(x[2] for x in r):6.0f}")  # fmt: skip


def psycopg_listener(dsn: str, key: tuple[int, int]) -> Callable[[bool], None]:
    """Hold (True) or release (False) the channel's bell, as a listener would."""
    import psycopg

    conn = psycopg.connect(dsn, autocommit=True)
    held = [False]

    def set_(on: bool) -> None:
        if on != held[0]:
            fn = "pg_advisory_lock_shared" if on else "pg_advisory_unlock_shared"
            conn.execute(f"SELECT {fn}(%s::int, %s::int)", key)
            held[0] = on

    return set_


def wal(conn: Any) -> float:
    return float(conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()[0])


def cpu_ns(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except OSError:  # not a local server
        return None


if __name__ == "__main__":
    main()
