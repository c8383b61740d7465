"""What keeping O(1) counts costs a PostgreSQL single add, by way of counting.

    python bench/pg_counting.py [--dsn ...] [-n 500] [--rounds 15]

Each way has its own copy of bunq's jobs table (its indexes, no triggers) and its own
counter table, in one fresh schema; the same fresh row (bunq's, as ``Queue.add`` builds
it) goes in by one autocommit statement, n times a round, the ways interleaved. Medians
of the rounds: wall µs per add, the server backend's CPU µs per add
(``/proc/<pid>/schedstat``: a local server only) and WAL bytes per add.

- ``none``: no counting (the floor of the row);
- ``bunq``: bunq's own plain-add statement (the NOTIFY part with no listener, schema v3:
  the statement appends its count, the row trigger skips it) on bunq's own table;
- ``v2``: the same statement as schema v2 sent it, counted by v2's statement trigger
  (a transition table; the counter row's ``UPDATE`` by key for a lone row);
- ``row``: a row trigger doing the counter row's ``UPDATE`` by key;
- ``marked``: the statement trigger only for statements marked bulk (its ``WHEN``),
  a row trigger for the rest (tried in session 13: the transition table is filled
  whatever the ``WHEN``);
- ``cte-update``: counting in the add's own statement (``WITH ins AS (INSERT ...)
  UPDATE counts ...``), no trigger;
- ``cte-append``: the add's statement appends a delta row to an unindexed table (a
  later fold would add the deltas to the counters; reads would sum both);
- ``trigger-append``: the statement trigger appends the delta row instead of the
  ``UPDATE``.

Whatever counts a lone add by ``UPDATE`` of a counter row pays for that update; the
append ways show what writing the count later would save.
"""

from __future__ import annotations

import argparse
import functools
import os
import uuid
from typing import Any

from pg_w1 import Timing, report, row_maker, timed
from use_tree import use_tree

DSN = "postgresql://postgres@127.0.0.1:5432/test"
SLOT = "pg_backend_pid() %% 16"  # (psycopg: a literal %)
WAYS = ("none", "bunq", "v2", "row", "marked", "cte-update", "cte-append", "trigger-append")
# The statement trigger's body, single-row branch {one} (the general upsert after it).
STMT_FN = """CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $f$
 DECLARE q text; st text; BEGIN
 SELECT queue, state INTO q, st FROM nt; PERFORM FROM nt OFFSET 1 LIMIT 1;
 IF NOT FOUND THEN {one} END IF;
 INSERT INTO {c} (queue, state, slot, n) SELECT queue, state, pg_backend_pid() % 16, count(*)
 FROM nt GROUP BY 1, 2 ON CONFLICT (queue, state, slot) DO UPDATE SET n = {c}.n + excluded.n;
 RETURN NULL; END $f$"""
UPDATE_ONE = ("UPDATE {c} SET n = n + 1 WHERE queue = {q} AND state = {st}"
              " AND slot = pg_backend_pid() % 16")  # fmt: skip
MARKED = "current_setting('bunq.bulk', true) = 'on'"


def setup(raw: Any, backend: Any) -> dict[str, str]:
    """The tables, triggers and each way's statement (with %s for the row's values)."""
    from bunq.backends.sql.queries import INSERT_COLS

    cols = ", ".join(INSERT_COLS)
    values = "VALUES (" + ", ".join(["%s"] * len(INSERT_COLS)) + ")"
    sqls = {"bunq": backend._insert_sql(1)}
    for i, way in enumerate(WAYS):
        if way == "bunq":
            continue
        j, c, d = f"j{i}", f"c{i}", f"d{i}"
        raw.execute(f"CREATE TABLE {j} (LIKE jobs INCLUDING ALL)")
        raw.execute(f"CREATE TABLE {c} (LIKE counts INCLUDING ALL)")
        raw.execute(f"CREATE TABLE {d} (queue TEXT NOT NULL, state TEXT NOT NULL, n BIGINT)")
        raw.execute(f"INSERT INTO {c} SELECT queue, state, s, 0 FROM counts,"
                    " generate_series(0, 15) AS s")  # fmt: skip
        sqls[way] = f"INSERT INTO {j} ({cols}) {values}"
        one = UPDATE_ONE.format(c=c, q="{q}", st="{st}")
        if way in ("row", "marked"):
            raw.execute(f"CREATE FUNCTION f{i}r() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN "
                        + one.format(q="NEW.queue", st="NEW.state")
                        + "; RETURN NULL; END $f$")  # fmt: skip
            when = f" WHEN (({MARKED}) IS NOT TRUE)" if way == "marked" else ""
            raw.execute(f"CREATE TRIGGER t{i}r AFTER INSERT ON {j} FOR EACH ROW{when}"
                        f" EXECUTE FUNCTION f{i}r()")  # fmt: skip
        if way in ("marked", "trigger-append", "v2"):
            if way == "trigger-append":
                single = f"INSERT INTO {d} VALUES (q, st, 1); RETURN NULL;"
            else:
                single = one.format(q="q", st="st") + "; IF FOUND THEN RETURN NULL; END IF;"
            raw.execute(STMT_FN.format(fn=f"f{i}s", c=c, one=single))
            when = f" WHEN ({MARKED})" if way == "marked" else ""
            raw.execute(f"CREATE TRIGGER t{i}s AFTER INSERT ON {j} REFERENCING NEW TABLE AS nt"
                        f" FOR EACH STATEMENT{when} EXECUTE FUNCTION f{i}s()")  # fmt: skip
        if way == "v2":
            sqls[way] = (f"WITH ins AS (INSERT INTO {j} ({cols}) {values} RETURNING queue)"
                         " SELECT pg_notify(%s, q) FROM (SELECT DISTINCT queue AS q FROM ins)"
                         " AS x WHERE NOT pg_try_advisory_xact_lock(%s::int, %s::int)")  # fmt: skip
        ins = f"WITH ins AS (INSERT INTO {j} ({cols}) {values} RETURNING queue, state)"
        if way == "cte-update":
            sqls[way] = (f"{ins} UPDATE {c} SET n = {c}.n + 1 FROM ins WHERE {c}.queue = ins.queue"
                         f" AND {c}.state = ins.state AND {c}.slot = {SLOT}")  # fmt: skip
        elif way == "cte-append":
            sqls[way] = f"{ins} INSERT INTO {d} SELECT queue, state, 1 FROM ins"
    return sqls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", default=os.environ.get("BUNQ_PG_DSN", DSN))
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--tree")
    args = ap.parse_args()
    use_tree(args.tree)
    import psycopg

    from bunq import Queue, connect

    schema = f"bunq_count_{uuid.uuid4().hex[:8]}"
    backend: Any = connect(f"{args.dsn}{'&' if '?' in args.dsn else '?'}schema={schema}")
    try:
        row = row_maker(backend, Queue("w1", backend))
        with psycopg.connect(args.dsn, autocommit=True) as raw:
            raw.execute(f'SET search_path = "{schema}"')
            sqls = setup(raw, backend)
            tail = backend._insert_tail  # the NOTIFY part's parameters
            res: dict[str, list[Timing]] = {w: [] for w in WAYS}
            for _ in range(args.rounds):
                for way in WAYS:
                    extra = tail if way in ("bunq", "v2") else []
                    fn = functools.partial(lambda sql, x: raw.execute(sql, [*row(), *x]),
                                           sqls[way], extra)  # fmt: skip
                    res[way].append(timed(fn, args.n, raw, raw.info.backend_pid))
    finally:
        backend.close()
        with psycopg.connect(args.dsn, autocommit=True) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    report("way", res)


if __name__ == "__main__":
    main()
