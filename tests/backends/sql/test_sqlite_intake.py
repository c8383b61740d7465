"""SQLite's intake: plain adds write a narrow table, every other transaction moves it
into ``jobs`` first, so no read, lookup or claim ever misses a job (sqlite.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bunq.backends.sql import sqlite as sqlite_mod
from bunq.backends.sql.sqlite import SQLiteBackend
from bunq.errors import DuplicateJob
from bunq.job import JobOptions, JobState, NewJob
from bunq.jobevents import EventKind


def rows(be: SQLiteBackend, table: str) -> int:
    """Rows of ``table`` as the file holds them (a plain read: absorbs nothing)."""
    return int(be._conn().execute(f"SELECT COUNT(*) FROM {table}").fetchall()[0][0])


def plain(queue: str = "q", job_id: str | None = None, **opts: Any) -> NewJob:
    job = NewJob(queue, "job", {"n": 1}, JobOptions(**opts))
    return job if job_id is None else NewJob(queue, "job", {"n": 1}, JobOptions(**opts), job_id)


@pytest.fixture
def be(tmp_path: Path) -> Any:
    backend = SQLiteBackend(str(tmp_path / "intake.db"))
    yield backend
    backend.close()


def test_a_plain_add_writes_the_intake_and_every_reader_sees_it(be: SQLiteBackend) -> None:
    (job,) = be.add([plain()])
    assert (rows(be, "intake"), rows(be, "jobs")) == (1, 0)
    got = be.get_job(job.id)
    assert got is not None and got.state is JobState.WAITING
    assert (rows(be, "intake"), rows(be, "jobs")) == (0, 1)  # the read moved it first
    be.add([plain() for _ in range(3)])
    assert be.counts("q")[JobState.WAITING] == 4
    assert rows(be, "intake") == 0


def test_a_lease_claims_intake_jobs_in_admission_order(be: SQLiteBackend) -> None:
    ids = [j.id for j in be.add([plain() for _ in range(5)])]
    ids += [be.add([plain()])[0].id for _ in range(3)]
    leased = be.lease("q", 10, 30_000, "w")
    assert [le.job.id for le in leased] == ids


def test_an_id_in_jobs_or_in_the_intake_is_a_duplicate_and_leaves_no_row(
        be: SQLiteBackend) -> None:  # fmt: skip
    be.add([plain(job_id="taken")])
    with pytest.raises(DuplicateJob):  # still in the intake: its UNIQUE
        be.add([plain(job_id="taken")])
    assert be.get_job("taken") is not None  # absorbed now
    with pytest.raises(DuplicateJob):  # in jobs: the add's NOT EXISTS
        be.add([plain(job_id="taken")])
    with pytest.raises(DuplicateJob):  # one of a bulk: the whole bulk is refused
        be.add([plain(), plain(job_id="taken"), plain()])
    assert (rows(be, "intake"), rows(be, "jobs")) == (0, 1)
    assert be.counts("q")[JobState.WAITING] == 1


def test_a_lookup_sees_an_intake_job(be: SQLiteBackend) -> None:
    (first,) = be.add([plain(job_id="same")])
    assert rows(be, "intake") == 1
    # The job_id option looks the id up: the add moves the intake first, so it answers
    # the job that is there rather than admitting a second one.
    (again,) = be.add([NewJob("q", "job", {"n": 2}, JobOptions(job_id="same"), "same")])
    assert again.id == first.id and again.data == {"n": 1}
    assert be.counts("q")[JobState.WAITING] == 1


def test_another_connection_absorbs_what_this_one_added(be: SQLiteBackend) -> None:
    other = SQLiteBackend(be.path)
    try:
        ids = {j.id for j in be.add([plain() for _ in range(4)])}
        assert {le.job.id for le in other.lease("q", 10, 30_000, "w")} == ids
        assert rows(be, "intake") == 0
    finally:
        other.close()


def test_a_backlog_moves_in_chunks_and_keeps_its_order(
        be: SQLiteBackend, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(sqlite_mod, "ABSORB_CHUNK", 10)
    commits: list[int] = []
    ids = [be.add([plain()])[0].id for _ in range(35)]
    conn = be._conn()
    conn.set_commit_hook(lambda: commits.append(1) or False)  # (False: let it commit)
    try:
        assert [le.job.id for le in be.lease("q", 35, 30_000, "w")] == ids
    finally:
        conn.set_commit_hook(None)
    # Three chunks of 10 committed on their own, then the last 5 with the lease.
    assert len(commits) == 4 and rows(be, "intake") == 0


def test_a_producer_alone_keeps_the_backlog_near_its_bound(
        be: SQLiteBackend, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(sqlite_mod, "INTAKE_BOUND", 50)
    monkeypatch.setattr(sqlite_mod, "ABSORB_CHUNK", 10)
    monkeypatch.setattr(sqlite_mod, "PROBE_EVERY", 16)
    most = 0
    for _ in range(300):
        be.add([plain()])
        most = max(most, rows(be, "intake"))
    assert 50 <= most <= 50 + 16  # probed every 16th row
    assert rows(be, "jobs") >= 300 - most
    for _ in range(3):  # bulks: probed after the insert, moved down to a chunk below
        be.add([plain() for _ in range(200)])
        assert rows(be, "intake") == 50 - 10
    assert be.counts("q")[JobState.WAITING] == 900


def test_non_plain_adds_go_to_jobs_after_the_intake(be: SQLiteBackend) -> None:
    be.add([plain()])
    be.add([plain(unique_key="k")])  # a lookup: absorbs, then writes jobs itself
    assert (rows(be, "intake"), rows(be, "jobs")) == (0, 2)
    be.add([plain(delay=60_000, priority=3, group="g", lifo=True)])  # plain: the intake
    assert rows(be, "intake") == 1
    counts = be.counts("q")
    assert (counts[JobState.WAITING], counts[JobState.DELAYED]) == (2, 1)


def test_a_lone_plain_add_is_one_autocommit_insert(be: SQLiteBackend) -> None:
    be.add([plain()])  # the first add learns that nobody reads q's events
    conn, seen = be._conn(), []
    conn.exec_trace = lambda _cur, sql, _bindings: seen.append(sql.split()[0]) or True
    try:
        be.add([plain()])
    finally:
        conn.exec_trace = None
    assert seen == ["INSERT"]  # no BEGIN, no COMMIT, no read of the registrations
    assert be.counts("q")[JobState.WAITING] == 2


def test_a_reader_registered_during_a_lone_add_still_gets_its_event(
        be: SQLiteBackend, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    be.add([plain()])
    reader = be.event_reader("q")
    answers = iter([True, False])  # "nobody reads" before the insert; moved after it
    monkeypatch.setattr(be._events, "unheard", lambda _q: next(answers))
    (job,) = be.add([plain()])
    assert next(answers, None) is None  # both looks were taken: the lone path ran
    got = [e.job_id for e in reader.read(1000) if e.kind is EventKind.ADDED]
    reader.close()
    assert got == [job.id]


# -- packs (schema v4): a bulk of plain jobs whose ids rise strictly is one row ----------


def named(prefix: str, numbers: Any) -> list[NewJob]:
    """Plain jobs with caller-made ids ``<prefix><nnn>`` (they rise as the numbers do)."""
    return [plain(job_id=f"{prefix}{k:03d}") for k in numbers]


def test_a_bulk_with_rising_ids_is_one_pack_that_every_reader_sees(be: SQLiteBackend) -> None:
    ids = [j.id for j in be.add([plain() for _ in range(200)])]
    assert (rows(be, "intake_packs"), rows(be, "intake"), rows(be, "jobs")) == (1, 0, 0)
    assert be.counts("q")[JobState.WAITING] == 200  # the read moved it first
    assert (rows(be, "intake_packs"), rows(be, "jobs")) == (0, 200)
    got = be.get_job(ids[7])
    assert got is not None and got.data == {"n": 1} and got.state is JobState.WAITING
    assert [le.job.id for le in be.lease("q", 300, 30_000, "w")] == ids


def test_a_big_bulk_is_cut_by_count_and_by_size_and_keeps_its_order(
        be: SQLiteBackend, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(sqlite_mod, "PACK_JOBS", 100)
    ids = [j.id for j in be.add([plain() for _ in range(250)])]
    assert rows(be, "intake_packs") == 3  # 100, 100, 50
    ((_, data, opts),) = be._prepare([plain()])
    per_job = len(data) + len(opts)  # what a pack's size counts
    monkeypatch.setattr(sqlite_mod, "PACK_BYTES", 20 * per_job)
    ids += [j.id for j in be.add([plain() for _ in range(100)])]
    sizes = [n for (n,) in be._conn().execute("SELECT n FROM intake_packs ORDER BY rid")]
    assert sizes == [100, 100, 50, 20, 20, 20, 20, 20]
    # a payload bigger than a pack may be: a pack of its own, sized before encoding
    big = [NewJob("q", "job", {"pad": "x" * 30 * per_job}, JobOptions()) for _ in range(64)]
    ids += [j.id for j in be.add(big)]
    sizes = [n for (n,) in be._conn().execute("SELECT n FROM intake_packs ORDER BY rid")]
    assert sizes[8:] == [1] * 64
    assert [le.job.id for le in be.lease("q", 500, 30_000, "w")] == ids


def test_ids_that_do_not_rise_or_may_exist_are_written_as_rows(be: SQLiteBackend) -> None:
    be.add(named("a", range(199, -1, -1)))  # falling ids: rows
    assert (rows(be, "intake_packs"), rows(be, "intake")) == (0, 200)
    be.add(named("a", range(200, 300)))  # rising, above every a-row: a pack
    assert (rows(be, "intake_packs"), rows(be, "intake")) == (1, 200)
    be.add(named("a", range(300, 400)))  # and another (its range is clear)
    assert rows(be, "intake_packs") == 2
    be.add(named("b", range(0, 200, 2)))
    be.add([plain() for _ in range(100)])
    assert rows(be, "intake_packs") == 4
    # the odd numbers lie inside a pack's range: their rows are refused there and
    # settled in jobs, after the whole intake moved
    be.add(named("b", range(1, 200, 2)))
    assert (rows(be, "intake_packs"), rows(be, "intake"), rows(be, "jobs")) == (0, 0, 700)
    be.add(named("c", range(100)))
    with pytest.raises(DuplicateJob):  # a range that holds ids: rows, one a duplicate
        be.add(named("c", [*range(100, 163), 50]))
    # nothing of it stays; the move made to settle it rolled back with it
    assert (rows(be, "intake_packs"), rows(be, "intake")) == (1, 0)
    with pytest.raises(DuplicateJob):  # a range that holds jobs' ids: rows, one taken
        be.add(named("b", range(150, 250)))
    assert be.counts("q")[JobState.WAITING] == 800 and rows(be, "intake") == 0


def test_an_id_inside_a_packs_range_is_settled_against_jobs(be: SQLiteBackend) -> None:
    be.add(named("k", range(0, 200, 2)))
    assert rows(be, "intake_packs") == 1
    (odd,) = be.add(named("k", [101]))  # in the range, not in the pack: admitted
    assert odd.id == "k101" and rows(be, "intake_packs") == 0  # the pack moved first
    be.add(named("m", range(0, 100)))  # a pack again
    with pytest.raises(DuplicateJob):  # in a pack: the lone add settles it in jobs
        be.add(named("m", [50]))
    with pytest.raises(DuplicateJob):  # the same through a small bulk (group commit)
        be.add([plain(), *named("m", [60]), plain()])
    # nothing of either stays; the moves made to settle them rolled back with them
    assert (rows(be, "intake"), rows(be, "intake_packs")) == (0, 1)
    assert be.counts("q")[JobState.WAITING] == 201


def test_a_backlog_of_packs_moves_a_few_per_transaction(
        be: SQLiteBackend, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(sqlite_mod, "PACK_JOBS", 64)
    monkeypatch.setattr(sqlite_mod, "PACKS_PER_MOVE", 2)
    ids = [j.id for _ in range(5) for j in be.add([plain() for _ in range(64)])]
    assert rows(be, "intake_packs") == 5
    commits: list[int] = []
    conn = be._conn()
    conn.set_commit_hook(lambda: commits.append(1) or False)
    try:
        assert [le.job.id for le in be.lease("q", 400, 30_000, "w")] == ids
    finally:
        conn.set_commit_hook(None)
    assert len(commits) == 3 and rows(be, "intake_packs") == 0  # 2 + 2, then 1 with the lease


def test_another_connection_absorbs_the_packs_this_one_added(
        be: SQLiteBackend) -> None:  # fmt: skip
    other = SQLiteBackend(be.path)
    try:
        ids = {j.id for j in be.add([plain() for _ in range(300)])}
        assert {le.job.id for le in other.lease("q", 500, 30_000, "w")} == ids
    finally:
        other.close()
