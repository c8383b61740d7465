"""PostgreSQL schema v3: plain adds append their count; folds move it into the counters.

A plain add's statement (one row, several, or COPY) marks itself and appends one
(queue, state, n) row to ``count_deltas``, so the row trigger skips its rows and no
counter row is written; counts read the counters plus the deltas, and a fold (the
sweep, a producer every FOLD_EVERY statements, close) moves the deltas over.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from conftest import PG_DSN

from bunq import Queue
from bunq.backends.sql import admin, postgres
from bunq.backends.sql.pgconn import COPY_MIN
from bunq.backends.sql.queries import SCHEMA_VERSION
from bunq.errors import ConfigError
from bunq.job import JobState
from bunq.queue import new_job

pytestmark = pytest.mark.postgres


def _tables(b: Any) -> dict[str, str]:
    return {n: f'"{b.schema}".{b.prefix}{n}'
            for n in ("jobs", "counts", "count_deltas", "queues", "meta")}  # fmt: skip


def _one(b: Any, sql: str) -> Any:
    with psycopg.connect(PG_DSN, autocommit=True) as c:
        row = c.execute(sql.format(**_tables(b))).fetchone()
    return None if row is None else row[0]


def _recount(b: Any) -> dict[tuple[str, str], int]:
    with psycopg.connect(PG_DSN, autocommit=True) as c:
        rows = c.execute("SELECT queue, state, count(*) FROM {jobs} GROUP BY 1, 2"
                         .format(**_tables(b))).fetchall()  # fmt: skip
    return {(q, st): n for q, st, n in rows}


def _counted(b: Any) -> dict[tuple[str, str], int]:
    """The counter rows plus the deltas, per (queue, state), zeros left out."""
    with psycopg.connect(PG_DSN, autocommit=True) as c:
        rows = c.execute(
            "SELECT queue, state, SUM(n) FROM (SELECT queue, state, n FROM {counts}"
            " WHERE state <> 'retired' UNION ALL SELECT queue, state, n FROM {count_deltas})"
            " AS x GROUP BY 1, 2 HAVING SUM(n) <> 0".format(**_tables(b))
        ).fetchall()
    return {(q, st): int(n) for q, st, n in rows}


def test_plain_adds_append_their_count_and_write_no_counter_row(pg: Any) -> None:
    b = pg()
    q = Queue("q", b)
    q.add("one", {})
    q.add_bulk([("few", {}, {})] * 3)
    q.add_bulk([("copied", {}, {})] * COPY_MIN)  # the COPY way
    assert _one(b, "SELECT count(*) FROM {counts}") == 0  # no counter row written
    assert _one(b, "SELECT count(*) FROM {queues}") == 0  # nor the registry
    assert _one(b, "SELECT count(*) FROM {count_deltas}") == 3  # one per statement
    assert b.counts("q")[JobState.WAITING] == 1 + 3 + COPY_MIN
    assert b.queues() == ["q"]  # the deltas' queues are listed
    b.sweep()  # folds
    assert _one(b, "SELECT count(*) FROM {count_deltas}") == 0
    assert _one(b, "SELECT SUM(n) FROM {counts} WHERE queue = 'q'") == 1 + 3 + COPY_MIN
    assert _one(b, "SELECT name FROM {queues}") == "q"
    assert b.counts("q")[JobState.WAITING] == 1 + 3 + COPY_MIN


def test_other_inserts_are_counted_by_the_row_trigger(pg: Any) -> None:
    b = pg()
    Queue("q", b).add("custom", {}, job_id="mine")  # not plain: looked up, then inserted
    assert _one(b, "SELECT count(*) FROM {count_deltas}") == 0
    assert _one(b, "SELECT SUM(n) FROM {counts} WHERE queue = 'q'") == 1
    with psycopg.connect(PG_DSN, autocommit=True) as c:  # any other writer of the table
        c.execute("INSERT INTO {jobs} (id, queue, name, state, seq, ord_at, run_at, created_at,"
                  " max_attempts) VALUES ('raw', 'q', 'j', 'waiting', 1, 1, 1, 1, 1)"
                  .format(**_tables(b)))  # fmt: skip
    assert b.counts("q")[JobState.WAITING] == 2


def test_a_copy_inside_a_transaction_resets_its_mark(pg: Any) -> None:
    # A bulk of jobs with ids of their own is COPYed inside the add's transaction; a
    # row inserted after it in the same transaction is the trigger's to count again.
    b = pg()
    now = b.clock()
    rows = [b._row(new_job("q", "j", None, {"job_id": f"id-{i}"}), b"\x80", b"", now, 0)[0]
            for i in range(COPY_MIN + 1)]  # fmt: skip
    with b._begin() as tx:
        tx.many("insert_job", rows[:COPY_MIN])
        tx.many("insert_job", rows[COPY_MIN:])
    assert _one(b, "SELECT SUM(n) FROM {count_deltas}") == COPY_MIN
    assert _one(b, "SELECT SUM(n) FROM {counts}") == 1
    assert b.counts("q")[JobState.WAITING] == COPY_MIN + 1


def test_a_producer_folds_every_fold_every_statements(
    pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "FOLD_EVERY", 5)
    b = pg()
    q = Queue("q", b)
    for _ in range(12):
        q.add("j", {})
    assert _one(b, "SELECT count(*) FROM {count_deltas}") == 2  # folded after 5 and 10
    assert _one(b, "SELECT SUM(n) FROM {counts}") == 10
    b.close()  # folds what it appended
    assert _one(b, "SELECT count(*) FROM {count_deltas}") == 0
    assert _one(b, "SELECT SUM(n) FROM {counts}") == 12


def test_an_obliterate_waits_for_an_add_whose_count_is_appended(pg: Any) -> None:
    # The add's job and its delta commit together; an obliterate that starts meanwhile
    # waits for them (its lock on the deltas) and deletes both: nothing is left
    # uncounted or counted without its job.
    b = pg()
    Queue("q", b).add("first", {})
    params = [
        *postgres.insert_row(b._row(new_job("q", "j", None, {}), b"\x80", b"", b.clock(), 0)[0]),
        *b._insert_tail,
    ]
    with psycopg.connect(PG_DSN) as side:  # the add's statement, held open
        side.execute(b._insert_sql(1), params)
        done = threading.Event()
        worker = threading.Thread(target=lambda: (b.obliterate("q"), done.set()))
        worker.start()
        assert not done.wait(0.5)
        side.commit()
        worker.join(10)
        assert done.is_set()
    assert _one(b, "SELECT count(*) FROM {jobs}") == 0
    assert _counted(b) == {}
    assert "q" not in b.queues() and b.counts("q")[JobState.WAITING] == 0


def test_an_obliterate_deletes_most_jobs_before_it_holds_adds_off(
    pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its early batches commit one by one; only the last transaction takes the lock
    # on the deltas, which waits here for another queue's add held open.
    monkeypatch.setattr(admin, "OBLITERATE_BATCH", 10)
    b = pg()
    Queue("q", b).add_bulk([("j", {}, {})] * 35)
    Queue("r", b).add("kept", {})
    params = [
        *postgres.insert_row(b._row(new_job("r", "j", None, {}), b"\x80", b"", b.clock(), 0)[0]),
        *b._insert_tail,
    ]
    with psycopg.connect(PG_DSN) as side:
        side.execute(b._insert_sql(1), params)
        done = threading.Event()
        worker = threading.Thread(target=lambda: (b.obliterate("q"), done.set()))
        worker.start()
        assert not done.wait(0.5)
        left = _one(b, "SELECT count(*) FROM {jobs} WHERE queue = 'q'")
        assert left < 10  # the early batches are gone already, for everyone
        side.commit()
        worker.join(10)
        assert done.is_set()
    assert b.counts("q")[JobState.WAITING] == 0 and "q" not in b.queues()
    assert b.counts("r")[JobState.WAITING] == 2
    assert _counted(b) == _recount(b)


def _produce(b: Any, i: int) -> None:
    q = Queue(f"q{i % 2}", b)
    for k in range(60):
        if k % 20 == 19:
            q.add_bulk([("bulk", {}, {})] * (COPY_MIN + k))
        else:
            q.add("one", {})


def _claim(b: Any, stop: threading.Event) -> None:
    while not stop.is_set():
        for name in ("q0", "q1"):
            for lease in b.lease(name, 5, 30_000, "w"):
                b.complete(lease)


def _sweep(b: Any, stop: threading.Event) -> None:
    while not stop.is_set():
        b.sweep()


def test_counts_stay_exact_while_producers_fold_and_workers_claim(
    pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "FOLD_EVERY", 3)
    b = pg({"pool_max": 12})
    stop = threading.Event()
    errors: list[BaseException] = []

    def guarded(fn: Any, *args: Any) -> threading.Thread:
        def run() -> None:
            try:
                fn(b, *args)
            except BaseException as exc:
                errors.append(exc)

        return threading.Thread(target=run)

    producers = [guarded(_produce, i) for i in range(4)]
    others = [guarded(_claim, stop), guarded(_sweep, stop)]
    for t in producers + others:
        t.start()
    for t in producers:
        t.join(120)
    stop.set()
    for t in others:
        t.join(60)
    assert not errors, errors
    assert _counted(b) == _recount(b)
    b.sweep()
    assert _one(b, "SELECT count(*) FROM {count_deltas}") == 0
    assert _counted(b) == _recount(b)


def test_a_v2_schema_upgrades_and_keeps_its_counts(pg: Any) -> None:
    b = pg()
    q = Queue("q", b)
    q.add_bulk([("j", {}, {})] * 10)
    b.complete(b.lease("q", 3, 30_000, "w")[0])
    b.sweep()
    before = b.counts("q")
    with psycopg.connect(PG_DSN, autocommit=True) as c:  # what v2 looked like
        t = _tables(b)
        c.execute(f"DROP TABLE {t['count_deltas']}")
        c.execute(f"DROP TRIGGER jobs_counted_ins ON {t['jobs']}")
        c.execute(f"UPDATE {t['meta']} SET value = '2' WHERE key IN ('schema_version', 'count_fn')")
    with pytest.raises(ConfigError, match="bunq migrate"):
        pg({"migrate": "off"})
    b2 = pg()  # migrate=auto
    assert _one(b2, "SELECT value FROM {meta} WHERE key = 'schema_version'") == str(SCHEMA_VERSION)
    assert b2.counts("q") == before
    Queue("q", b2).add("after", {})
    assert b2.counts("q")[JobState.WAITING] == before[JobState.WAITING] + 1
