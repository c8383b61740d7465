"""The plain add's INSERT through libpq (``sql/pgplain.py``): prepared per connection
and row count, prepared again when the server forgets it, its errors the ones psycopg
raises, and psycopg's own way where this one does not apply."""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg
import pytest
from conftest import PG_DSN

from bunq.backends.sql.pgplain import dumped, numbered
from bunq.errors import BackendError, DuplicateJob
from bunq.job import JobState
from bunq.queue import new_job

pytestmark = pytest.mark.postgres


def _on_its_connection(b: Any, sql: str) -> list[tuple[Any, ...]]:
    """``sql`` run on the connection a lone add uses (the spare, after one add)."""
    conn = b._checkout()
    try:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description is not None else []
    finally:
        b._release(conn)


def _prepared(b: Any) -> set[str]:
    rows = _on_its_connection(b, "SELECT name FROM pg_prepared_statements")
    return {r[0] for r in rows if r[0].startswith("bunq_add")}


def test_a_lone_add_and_a_small_batch_run_statements_prepared_on_the_connection(
    pg: Any,
) -> None:
    b = pg()
    b.add([new_job("q", "job", {"n": 0}, {})])
    assert _prepared(b) == {"bunq_add1"}
    b.add([new_job("q", "job", {"n": i}, {}) for i in range(1, 4)])
    assert _prepared(b) == {"bunq_add1", "bunq_add3"}
    assert b.counts("q")[JobState.WAITING] == 4
    leased = b.lease("q", 4, 30_000)
    assert [le.job.data["n"] for le in leased] == [0, 1, 2, 3]
    assert [le.job.name for le in leased] == ["job"] * 4


def test_text_and_bytes_survive_the_way_there_unchanged(pg: Any) -> None:
    b = pg()
    data = {"s": "naïve ✓ 𝄞", "b": b"\x00\xff\x01", "n": -(2**62), "none": None}
    b.add([new_job("q", "naïve ✓", data, {"priority": -5})])
    (le,) = b.lease("q", 1, 30_000)
    assert (le.job.name, le.job.data, le.job.opts.priority) == ("naïve ✓", data, -5)


def test_a_statement_the_server_forgot_is_prepared_again(pg: Any) -> None:
    b = pg()
    b.add([new_job("q", "job", None, {})])
    _on_its_connection(b, "DEALLOCATE ALL")
    assert _prepared(b) == set()
    b.add([new_job("q", "job", None, {})])
    assert _prepared(b) == {"bunq_add1"}
    assert b.counts("q")[JobState.WAITING] == 2


def test_a_replayed_add_is_success_and_a_clashing_id_a_duplicate(pg: Any) -> None:
    b = pg()
    one = [new_job("q", "job", {"n": 1}, {})]
    few = [new_job("q", "job", {"n": i}, {}) for i in range(5)]
    for jobs in (one, few):
        assert [j.id for j in b.add(jobs)] == [j.id for j in jobs]
        assert [j.id for j in b.add(jobs)] == [j.id for j in jobs]  # the same rows: a replay
    assert b.counts("q")[JobState.WAITING] == 6
    clash = new_job("q", "job", {"n": "other"}, {})
    b.add([clash])
    other = dataclasses.replace(new_job("q", "job", {"n": "different"}, {}), id=clash.id)
    with pytest.raises(DuplicateJob):
        b.add([other])
    assert b.counts("q")[JobState.WAITING] == 7


def test_a_server_error_is_the_error_psycopg_raises_for_it(pg: Any) -> None:
    b = pg()
    b.add([new_job("q", "job", None, {})])  # prepared before the fault
    s = f'"{b.schema}"'
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"""CREATE FUNCTION {s}.refuse() RETURNS trigger AS $$
            BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '23514'; END
            $$ LANGUAGE plpgsql""")  # fmt: skip
        conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON {s}.jobs"
                     f" FOR EACH ROW EXECUTE FUNCTION {s}.refuse()")  # fmt: skip
    with pytest.raises(BackendError) as info:
        b.add([new_job("q", "job", None, {})])
    assert isinstance(info.value.__cause__, psycopg.errors.CheckViolation)
    assert "refused" in str(info.value)
    assert b.counts("q")[JobState.WAITING] == 1


def test_a_connection_in_another_encoding_takes_psycopgs_way(pg: Any) -> None:
    b = pg({"client_encoding": "LATIN1"})
    b.add([new_job("q", "café", {"s": "é"}, {})])
    assert _prepared(b) == set()
    (le,) = b.lease("q", 1, 30_000)
    assert (le.job.name, le.job.data) == ("café", {"s": "é"})


def test_parameters_it_does_not_dump_are_left_to_psycopg() -> None:
    assert dumped(["a", 1, b"\x00", None]) == ([b"a", b"1", b"\x00", None], [0, 0, 1, 0])
    assert dumped([True]) is None
    assert dumped([1.5]) is None
    assert numbered("VALUES (%s, %s) WHERE %s") == "VALUES ($1, $2) WHERE $3"
    assert numbered("WHERE a LIKE 'x%%' AND b = %s") == "WHERE a LIKE 'x%' AND b = $1"


def test_concurrent_producers_admit_and_count_every_job_once(pg: Any) -> None:
    import threading

    b = pg({"pool_max": 4})
    per, producers = 300, 8
    ids: list[list[str]] = [[] for _ in range(producers)]
    go = threading.Barrier(producers)

    def produce(i: int) -> None:
        go.wait()
        for k in range(per):
            ids[i].append(b.add([new_job("q", "job", {"p": i, "k": k}, {})])[0].id)

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    every = [j for got in ids for j in got]
    assert len(every) == len(set(every)) == per * producers
    assert b.counts("q")[JobState.WAITING] == per * producers
    leased = b.lease("q", per * producers, 30_000)
    assert sorted(le.job.id for le in leased) == sorted(every)
    seen: dict[int, list[int]] = {}
    for le in leased:
        seen.setdefault(le.job.data["p"], []).append(le.job.data["k"])
    assert all(sorted(ks) == list(range(per)) for ks in seen.values())
