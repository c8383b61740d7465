"""SQL backends at scale: counters kept with every change, the queue registry, sweep
statements on index ranges, the upgrade of a v1 database, and SIGKILL mid-write."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from contract.helpers import add, fail

from bunq import JobState
from bunq.backends.base import DlqConfig
from bunq.backends.sql.queries import SCHEMA_VERSION, SQLITE_SCHEMA_VERSION

KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
STATES = ("waiting", "delayed", "active", "completed", "failed", "waiting-children")


def truth(backend: Any, queue: str) -> dict[str, int]:
    """Count the jobs table itself (no counters): the ground truth."""
    out = dict.fromkeys(STATES, 0)
    with backend._read() as tx:
        rows = tx.sql(_jobs_sql(backend, "SELECT state, run_at FROM {jobs} WHERE queue = :q"),
                      {"q": queue})  # fmt: skip
    now = backend.clock()
    for state, run_at in rows:
        out["delayed" if state == "waiting" and run_at > now else state] += 1
    return out


def _jobs_sql(backend: Any, text: str) -> str:
    jobs = re.search(r"FROM (\S+) WHERE id = ", backend._sql["get_job"])
    assert jobs is not None
    out = text.replace("{jobs}", jobs.group(1))
    return re.sub(r":([a-z]+)", r"%(\1)s", out) if backend.kind == "postgres" else out


def counted(backend: Any, queue: str) -> dict[str, int]:
    c = backend.counts(queue)
    return {s: c[JobState(s)] for s in STATES}


@pytest.fixture(params=KINDS)
def sql(request: pytest.FixtureRequest, make_backend: Callable[..., Any], clock: Any) -> Any:
    return make_backend(request.param, clock=clock, completed_max_count=7)


def test_counts_equal_a_recount_after_random_operations(sql: Any, clock: Any) -> None:
    rng = random.Random(7)
    sql.dlq_config("q", DlqConfig(max_entries=5))
    held: list[Any] = []
    for step in range(300):
        held = _random_op(sql, rng, clock, held)
        if step % 25 == 0:
            for queue in ("q", "r"):
                assert counted(sql, queue) == truth(sql, queue), (step, queue)
    clock.advance(10_000)
    sql.sweep()
    for queue in ("q", "r"):
        assert counted(sql, queue) == truth(sql, queue)
    assert truth(sql, "q")["completed"] <= 7 and truth(sql, "q")["failed"] <= 5  # bounds held
    sql.obliterate("r", force=True)
    assert counted(sql, "r") == dict.fromkeys(STATES, 0) and "r" not in sql.queues()


def _random_op(sql: Any, rng: random.Random, clock: Any, held: list[Any]) -> list[Any]:
    op = rng.random()
    if op < 0.35:
        opts: dict[str, Any] = {"attempts": rng.choice([1, 2])}
        if rng.random() < 0.2:
            opts["delay"] = rng.choice([500, 5_000])
        if rng.random() < 0.2:
            opts["group"] = rng.choice("ab")
        if rng.random() < 0.1:
            opts["remove_on_complete"] = True
        if rng.random() < 0.1 and held:
            opts["depends_on"] = [held[0].id]
        add(sql, rng.choice(["q", "r"]), **opts)
    elif op < 0.6:
        held += sql.lease(rng.choice(["q", "r"]), rng.randint(1, 3), 1_000, "t")
    elif op < 0.75 and held:
        sql.complete(held.pop(rng.randrange(len(held))))
    elif op < 0.85 and held:
        fail(sql, held.pop(rng.randrange(len(held))))
    elif op < 0.92:
        clock.advance(rng.choice([200, 1_500]))  # leases expire: the sweep recovers them
        sql.sweep()
        held = [h for h in held if h.expires_at > clock()]
    elif op < 0.95:
        sql.dlq_retry("q")
    elif op < 0.97:
        sql.drain("r")
    else:
        sql.clean("q", 0, 3, JobState.COMPLETED)
    return held


def test_the_registry_lists_every_queue_without_reading_jobs(sql: Any) -> None:
    for name in ("a", "b", "c"):
        add(sql, name)
    sql.pause("d")  # a queue known by its settings only
    assert {"a", "b", "c", "d"} <= set(sql.queues())
    assert "jobs" not in sql._sql["queue_names"]
    sql.drain("b")
    assert "b" in sql.queues()  # known until obliterated, like the memory engine
    sql.obliterate("b")
    assert "b" not in sql.queues()


def test_retention_and_dlq_bounds_prune_in_batches(sql: Any) -> None:
    from bunq.backends.sql.sweep import SWEEP_BATCH

    sql.completed_max_count = 10
    total = SWEEP_BATCH * 2 + 30
    sql.add([_new("q") for _ in range(total)])
    while True:
        got = sql.lease("q", 100, 30_000, "t")
        if not got:
            break
        sql.complete_many([(lease, None) for lease in got])
    assert counted(sql, "q")["completed"] == total
    sql.sweep()
    assert counted(sql, "q")["completed"] == truth(sql, "q")["completed"] == 10


def _new(queue: str) -> Any:
    from bunq.queue import new_job

    return new_job(queue, "j", None, {})


SWEEP_AND_READS = ("expired_leases", "ttl_expire", "uniq_expire", "prune_before",
                   "prune_oldest", "dlq_auto_retry", "group_rate_idle", "obliterate")  # fmt: skip


def test_every_sweep_statement_is_bounded(sql: Any) -> None:
    for name in SWEEP_AND_READS:
        assert "LIMIT" in sql._sql[name], name


def test_sqlite_plans_read_index_ranges_not_the_table(make_backend: Callable[..., Any]) -> None:
    be = make_backend("sqlite")
    params = {"now": 0, "lim": 1, "queue": "q", "state": "completed", "before": 0,
              "max_retries": 1, "after": "", "grp": "g", "n": 1, "token": "t", "owner": "o",
              "idle": 0, "until": 0}  # fmt: skip
    names = (*SWEEP_AND_READS, "sweep_due", "counts", "count_state", "finished_counts",
             "queue_names", "claim_info", "group_names", "group_heads", "group_active",
             "jobs_finished", "jobs_delayed", "lease")  # fmt: skip
    with be._read() as tx:
        for name in names:
            sql = be._sql[name]
            used = {k: v for k, v in params.items() if f":{k}" in sql}
            used.update({"limit": 1, "offset": 0} if ":limit" in sql else {})
            plan = [str(r[-1]) for r in tx.sql("EXPLAIN QUERY PLAN " + sql, used)]
            scans = [p for p in plan if re.match(r"SCAN (jobs|uniq|grp_rate)\b", p)]
            assert not scans, (name, plan)


def test_a_v1_database_upgrades_in_place(make_backend: Callable[..., Any], tmp_path: Path,
                                         request: pytest.FixtureRequest) -> None:  # fmt: skip
    from bunq.backends.sql.sqlite import SQLiteBackend

    path = str(tmp_path / "old.db")
    be = SQLiteBackend(path)
    _populate(be)
    expected = {q: truth(be, q) for q in ("q", "r")}
    with be._begin() as tx:  # back to the v1 schema: no counters, registry, new indexes
        _downgrade(tx, "")
    be.close()
    be = SQLiteBackend(path)  # opening migrates (under the write lock)
    try:
        assert {q: counted(be, q) for q in ("q", "r")} == expected
        assert {"q", "r"} <= set(be.queues())
        add(be, "q")
        expected["q"]["waiting"] += 1
        assert counted(be, "q") == expected["q"] == truth(be, "q")
        with be._read() as tx:
            assert tx.q("meta_get", key="schema_version")[0][0] == str(SQLITE_SCHEMA_VERSION)
    finally:
        be.close()


@pytest.mark.parametrize("version", [2, 3])
def test_an_older_sqlite_file_gains_the_intake_and_a_newer_one_is_refused(
        tmp_path: Path, version: int) -> None:  # fmt: skip
    from bunq.backends.sql.sqlite import SQLiteBackend
    from bunq.errors import ConfigError

    path = str(tmp_path / f"v{version}.db")
    be = SQLiteBackend(path)
    _populate(be)
    expected = {q: truth(be, q) for q in ("q", "r")}
    with be._begin() as tx:  # the same, without v4's packs and (v2) v3's intake: both
        tx.raw("DROP TABLE intake_packs")  # empty after the absorb
        if version < 3:
            tx.raw("DROP TABLE intake")
        tx.raw(f"UPDATE meta SET value = '{version}' WHERE key = 'schema_version'")
    be.close()
    be = SQLiteBackend(path)
    try:
        assert {q: counted(be, q) for q in ("q", "r")} == expected
        add(be, "q")
        expected["q"]["waiting"] += 1
        be.add([_new("q") for _ in range(100)])  # a pack (v4)
        expected["q"]["waiting"] += 100
        assert counted(be, "q") == expected["q"] == truth(be, "q")
        with be._begin() as tx:
            assert tx.q("meta_get", key="schema_version")[0][0] == str(SQLITE_SCHEMA_VERSION)
            tx.q("meta_put", key="schema_version", value=str(SQLITE_SCHEMA_VERSION + 1))
    finally:
        be.close()
    with pytest.raises(ConfigError, match="newer than this bunq"):
        SQLiteBackend(path)


@pytest.mark.postgres
def test_a_v1_postgres_schema_upgrades_with_bunq_migrate(make_backend: Callable[..., Any]) -> None:
    from bunq.backends.sql.postgres import PostgresBackend
    from bunq.errors import ConfigError

    be = make_backend("postgres")
    _populate(be)
    expected = {q: truth(be, q) for q in ("q", "r")}
    with be._begin() as tx:
        _downgrade(tx, f'"{be._test_schema}".')
    dsn = be.dsn
    with pytest.raises(ConfigError, match="bunq migrate"):
        PostgresBackend(dsn, schema=be._test_schema, migrate="off")
    assert be.migrate() == SCHEMA_VERSION  # what `bunq migrate` runs
    fresh = PostgresBackend(dsn, schema=be._test_schema, migrate="off")
    try:
        assert {q: counted(fresh, q) for q in ("q", "r")} == expected
        assert {"q", "r"} <= set(fresh.queues())
    finally:
        fresh.close()


def _populate(be: Any) -> None:
    for i in range(20):
        add(be, "q" if i % 3 else "r", delay=10_000 if i % 5 == 0 else 0, attempts=1)
    leases = be.lease("q", 6, 30_000, "t")
    be.complete(leases[0])
    be.complete(leases[1])
    fail(be, leases[2])


def _downgrade(tx: Any, qual: str) -> None:
    pg = bool(qual)
    for trig in ("jobs_counted_ins", "jobs_counted_upd", "jobs_counted_del"):
        tx.raw(f"DROP TRIGGER IF EXISTS {trig}" + (f" ON {qual}jobs" if pg else ""))
    for table in ("counts", "grp_rate") + (("count_deltas",) if pg else ()):
        tx.raw(f"DROP TABLE {qual}{table}")  # (v1 had neither; the backfill counts the jobs)
    for index in ("jobs_finished", "jobs_delayed", "jobs_group", "uniq_until"):
        tx.raw(f"DROP INDEX {qual}{index}")
    tx.raw(f"DELETE FROM {qual}queues")  # v1 listed queues by scanning jobs
    if not pg:
        tx.raw("DROP TABLE intake")  # SQLite v3 and v4 (empty: this transaction absorbed it)
        tx.raw("DROP TABLE intake_packs")
    tx.raw(f"UPDATE {qual}meta SET value = '1' WHERE key = 'schema_version'")
    if pg:
        tx.q("key_lock", key="flush")  # send the pending statements


CHILD = """
import random, sys
from bunq.backends import connect
from bunq.queue import new_job
be = connect(sys.argv[1])
rng = random.Random()
print("ready", flush=True)
while True:
    be.add([new_job("k", "j", None, {}) for _ in range(rng.randint(1, 50))])
    got = be.lease("k", rng.randint(1, 30), 60_000, "w")
    be.complete_many([(x, None) for x in got[: len(got) // 2]])
"""


@pytest.mark.parametrize("kind", KINDS)
def test_counters_survive_sigkill_mid_write(kind: str, make_backend: Callable[..., Any],
                                            tmp_path: Path) -> None:  # fmt: skip
    be = make_backend(kind)
    url = f"sqlite:///{be.path}" if kind == "sqlite" else _pg_url(be)
    root = str(Path(__file__).resolve().parents[3])
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", CHILD, url], stdout=subprocess.PIPE,
                                 text=True, env={**os.environ, "PYTHONPATH": root})  # fmt: skip
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(random.uniform(0.3, 0.8))
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    t = truth(be, "k")
    assert t["waiting"] + t["active"] + t["completed"] > 0
    assert counted(be, "k") == t


def _pg_url(be: Any) -> str:
    from conftest import PG_DSN

    sep = "&" if "?" in PG_DSN else "?"
    return f"{PG_DSN}{sep}schema={be._test_schema}"
