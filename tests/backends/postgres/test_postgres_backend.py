"""What the contract suite cannot state about PostgreSQL: names, schema, clock, wake-ups,
races between brokers, and driver faults."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from conftest import PG_DSN
from contract.helpers import add

from bunq.backends.base import QueueLimits
from bunq.backends.sql.postgres import DbClock, PostgresBackend, translate_errors
from bunq.backends.sql.queries import COUNT_FN_REV, SCHEMA_VERSION
from bunq.errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    DuplicateJob,
    ValidationError,
)  # fmt: skip
from bunq.job import JobState, Settle
from bunq.queue import new_job

pytestmark = pytest.mark.postgres


def _race(n: int, fn: Any) -> list[Any]:
    """Run fn(i) in n threads released together; return results (or exceptions)."""
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = fn(i)
        except Exception as exc:  # the test inspects it
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


# -- names and URL ------------------------------------------------------------------------
@pytest.mark.parametrize("schema", ['bad"name', "1abc", "a b", "x" * 64, "a;drop"])
def test_invalid_schema_names_are_refused(schema: str) -> None:
    with pytest.raises(ConfigError):
        PostgresBackend(PG_DSN, schema=schema)


@pytest.mark.parametrize("prefix", ["Bad", "1x", "a-b", "x" * 33])
def test_invalid_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(ConfigError):
        PostgresBackend(PG_DSN, prefix=prefix)


def test_url_options_are_stripped_before_libpq(pg: Any) -> None:
    b = pg({"prefix": "bq_", "pool_min": 1, "pool_max": 3, "application_name": "bunq_t"})
    assert "schema=" not in b.dsn and "prefix=" not in b.dsn and "pool_" not in b.dsn
    assert "application_name=bunq_t" in b.dsn and b.prefix == "bq_"
    add(b)
    assert b.counts("q")[JobState.WAITING] == 1


def test_bad_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        PostgresBackend.from_url(f"{PG_DSN}?pool_max=many")
    with pytest.raises(ConfigError):
        PostgresBackend.from_url(f"{PG_DSN}?nonsense_option=1")


def test_prefixes_keep_namespaces_apart_in_one_schema(pg: Any) -> None:
    a, b = pg({"prefix": "a_"}), pg({"prefix": "b_"})
    add(a)
    assert a.counts("q")[JobState.WAITING] == 1 and b.counts("q")[JobState.WAITING] == 0


# -- schema and migrate -------------------------------------------------------------------
def test_migrate_is_idempotent_and_records_the_version(pg: Any) -> None:
    b = pg()
    assert b.migrate() == SCHEMA_VERSION
    assert b.migrate() == SCHEMA_VERSION
    with b._read() as tx:
        assert tx.q("meta_get", key="schema_version") == [(str(SCHEMA_VERSION),)]


def test_concurrent_brokers_migrate_a_new_schema_once(pg_url: Any) -> None:
    from bunq.backends import connect

    made = _race(6, lambda i: connect(pg_url()))
    try:
        assert all(isinstance(b, PostgresBackend) for b in made), made
        assert {b.migrate() for b in made} == {SCHEMA_VERSION}
    finally:
        for b in made:
            if isinstance(b, PostgresBackend):
                b.close()


def test_migrate_off_needs_an_explicit_migrate(pg: Any) -> None:
    with pytest.raises(ConfigError, match="bunq migrate"):
        pg({"migrate": "off"})
    pg().close()  # migrate=auto (the default) creates the schema
    assert pg({"migrate": "off"}).counts("q")[JobState.WAITING] == 0


def test_a_newer_schema_is_refused(pg: Any) -> None:
    b = pg()
    with b._begin() as tx:
        tx.q("meta_put", key="schema_version", value=str(SCHEMA_VERSION + 1))
    with pytest.raises(ConfigError, match="newer"):
        pg()


def test_an_older_trigger_function_is_replaced_by_migrate(pg: Any) -> None:
    # Same schema version, older trigger revision (a v2 schema of an earlier release):
    # migrate=off keeps it (it counts the same), migrate=auto installs this one.
    b = pg()
    with b._begin() as tx:
        tx.sql(f"DELETE FROM {b._meta} WHERE key = 'count_fn'", {})
        tx.sql(f"CREATE OR REPLACE FUNCTION {b._meta[: -len('meta')]}count_fn() RETURNS"
               f" trigger LANGUAGE plpgsql AS $f$ BEGIN RETURN NULL; END $f$", {})  # fmt: skip

    def body() -> str:
        with b._read() as tx:
            return str(tx.sql("SELECT prosrc FROM pg_proc WHERE oid = %(f)s::regproc",
                              {"f": b._meta[: -len("meta")] + "count_fn"})[0][0])  # fmt: skip

    pg({"migrate": "off"}).close()
    assert "TG_OP" not in body()
    pg().close()
    assert "TG_OP = 'UPDATE'" in body()
    with b._read() as tx:
        assert tx.q("meta_get", key="count_fn") == [(str(COUNT_FN_REV),)]


def test_single_adds_count_and_register_their_queue_after_an_obliterate(pg: Any) -> None:
    # A single-row insert bumps its existing counter row by key and skips the registry;
    # after an obliterate (registry and counter rows gone) it registers the queue again.
    b = pg()
    for _ in range(3):
        for i in range(4):
            b.add([new_job("q", "j", None, {})])
            b.add([new_job("r", "j", None, {"delay": 60_000})])
            assert b.counts("q")[JobState.WAITING] == i + 1
            assert b.counts("r")[JobState.DELAYED] == i + 1
        assert {"q", "r"} <= set(b.queues())
        b.obliterate("q")
        assert "q" not in b.queues() and b.counts("q")[JobState.WAITING] == 0
        b.obliterate("r")


def test_an_add_racing_an_obliterate_keeps_its_job_registration_and_count_or_none(
    pg: Any,
) -> None:
    # A single-row insert whose trigger bumped its counter row by key (and so skipped the
    # registry) is still uncommitted when an obliterate starts: the obliterate waits for
    # it and deletes its job too. Before obliterate held the counter rows from its start,
    # the job survived with neither its count nor its queue's registration.
    b = pg()
    t = {n: f'"{b.schema}".{b.prefix}{n}' for n in ("jobs", "counts", "queues")}
    row = (
        "INSERT INTO {jobs} (id, queue, name, state, seq, ord_at, run_at, created_at,"
        " max_attempts) VALUES (%s, 'q', 'j', 'waiting', 1, 1, 1, 1, 1)"
    ).format(**t)
    add(b, "q")
    with psycopg.connect(PG_DSN) as side:
        side.execute(row, ("side-1",))  # this backend's counter row exists from now on
        side.commit()
        side.execute(row, ("side-2",))  # the single-row way: an UPDATE by key, held
        done = threading.Event()
        worker = threading.Thread(target=lambda: (b.obliterate("q"), done.set()))
        worker.start()
        assert not done.wait(0.5)  # waits for the add's counter row
        side.commit()
        worker.join(10)
        assert done.is_set()
        left = side.execute(f"SELECT count(*) FROM {t['jobs']} WHERE queue = 'q'").fetchone()
        counted = side.execute(
            f"SELECT coalesce(sum(n), 0) FROM {t['counts']} WHERE queue = 'q'"
        ).fetchone()
    assert left == (0,) and counted == (0,)
    assert "q" not in b.queues() and b.counts("q")[JobState.WAITING] == 0


# -- the database clock -------------------------------------------------------------------
def test_default_clock_is_the_database_clock(pg: Any) -> None:
    b = pg()
    assert isinstance(b.clock, DbClock) and b.clock.error_ms < 5
    with psycopg.connect(PG_DSN) as conn:
        for _ in range(5):
            before = b.clock()
            db = float(conn.execute("SELECT extract(epoch FROM clock_timestamp())*1000")
                       .fetchone()[0])  # fmt: skip
            after = b.clock()
            assert before - 2 <= db <= after + 2


class _SkewedConn:
    """A connection whose server clock runs ``skew_ms`` ahead of this host."""

    def __init__(self, skew_ms: float) -> None:
        self.skew_ms = skew_ms

    def execute(self, sql: str, prepare: bool = False) -> Any:
        value = time.time() * 1000 + self.skew_ms

        class _Cur:
            def fetchone(self) -> tuple[float]:
                return (value,)

        return _Cur()


def test_db_clock_follows_a_skewed_server() -> None:
    clock = DbClock("SELECT 1")
    clock.sync(_SkewedConn(5_000))  # type: ignore[arg-type]
    assert abs(clock() - (time.time() * 1000 + 5_000)) < 5
    assert abs(clock.offset_ms - 5_000) < 5 and clock.due > time.monotonic()


def test_injected_clock_is_used_for_leases(pg: Any, clock: Any) -> None:
    b = pg(clock=clock)
    add(b)
    lease = b.lease("q", 1, 1_000)[0]
    assert lease.expires_at == clock.now + 1_000


# -- LISTEN/NOTIFY ------------------------------------------------------------------------
def test_notify_wakes_an_idle_waiter_within_50_ms(pg: Any) -> None:
    worker_side, producer_side = pg(), pg()
    assert worker_side.wait("q", 10) is True  # first wait: starts listening
    worker_side.wait("q", 300)  # the (re)connect wake-up, if not consumed yet
    lat: list[float] = []
    for _ in range(5):
        woke: list[float] = []
        t = threading.Thread(target=lambda woke=woke: worker_side.wait("q", 2_000) and woke.append(
            time.perf_counter()))  # fmt: skip
        t.start()
        time.sleep(0.05)
        start = time.perf_counter()
        add(producer_side)
        t.join(3)
        assert woke, "no wake-up"
        lat.append((woke[0] - start) * 1000)
        assert worker_side.lease("q", 1, 30_000)
    assert sorted(lat)[len(lat) // 2] < 50, lat


def test_wait_times_out_without_work_and_a_missed_ring_is_kept(pg: Any) -> None:
    b = pg()
    b.wait("other", 10)
    start = time.perf_counter()
    assert b.wait("other", 100) in (False, True)  # True only for the listener's first connect
    b.wait("other", 100)
    start = time.perf_counter()
    assert b.wait("other", 100) is False
    assert time.perf_counter() - start >= 0.09
    add(pg(), queue="other")  # rung while nobody waits ...
    time.sleep(0.2)
    assert b.wait("other", 1_000) is True  # ... and still seen by the next wait


def _bell_held(b: Any) -> bool:
    with psycopg.connect(PG_DSN, autocommit=True) as c, c.transaction():
        row = c.execute("SELECT pg_try_advisory_xact_lock(%s::int, %s::int)", b._bell).fetchone()
        return not row[0]


def test_plain_adds_skip_the_notify_only_while_nobody_listens(pg: Any) -> None:
    b = pg()
    with psycopg.connect(PG_DSN, autocommit=True) as outsider:  # LISTENs, holds no bell
        outsider.execute(f"LISTEN {b._channel}")
        add(b)
        assert list(outsider.notifies(timeout=0.3, stop_after=1)) == []
        b.wait("q", 10)  # starts bunq's listener: the bell held shared, then LISTEN
        deadline = time.monotonic() + 5
        while not _bell_held(b):
            assert time.monotonic() < deadline, "the listener never took the bell"
            time.sleep(0.02)
        add(b)
        assert [n.payload for n in outsider.notifies(timeout=5, stop_after=1)] == ["q"]
    assert b.counts("q")[JobState.WAITING] == 2


def test_a_listener_starting_during_an_add_waits_for_its_commit(pg: Any) -> None:
    # A producer that found no listener holds the bell to its commit: the listener's
    # LISTEN (and so the worker's next claim) comes after the rows are visible.
    b = pg()
    with psycopg.connect(PG_DSN) as producer:
        producer.execute("SELECT pg_advisory_xact_lock(%s::int, %s::int)", b._bell)
        b.wait("q", 10)
        time.sleep(0.3)
        with psycopg.connect(PG_DSN, autocommit=True) as c:
            waiting = c.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                                " AND NOT granted AND classid = %s::int::oid",
                                (b._bell[0],)).fetchone()  # fmt: skip
        assert waiting is not None and waiting[0] == 1
        producer.commit()
    deadline = time.monotonic() + 5
    while not _bell_held(b):
        assert time.monotonic() < deadline
        time.sleep(0.02)


# -- the spare connection -----------------------------------------------------------------
def test_a_lone_producer_reuses_its_connection_without_the_pool(pg: Any) -> None:
    b = pg()
    add(b)
    cur = b._plain_cur  # and its cursor
    calls: list[int] = []
    real = b._pool.getconn
    b._pool.getconn = lambda *a, **kw: calls.append(1) or real(*a, **kw)
    for _ in range(5):
        add(b)
    assert b.counts("q")[JobState.WAITING] == 6
    assert calls == [] and b._spare is not None and b._plain_cur is cur


def test_a_checkout_waiting_in_the_pool_gets_the_connection_back(pg: Any) -> None:
    b = pg({"pool_max": 1})
    held = b._checkout()
    got: list[float] = []

    def second() -> None:
        conn = b._checkout()  # waits in the pool: the only connection is out
        got.append(time.perf_counter())
        b._release(conn)

    t = threading.Thread(target=second)
    t.start()
    time.sleep(0.3)
    released = time.perf_counter()
    b._release(held)  # to the pool (someone waits there), not aside as the spare
    t.join(10)
    assert got and got[0] - released < 1.0
    add(b)  # one connection for everything: adds, reads, a bulk add and its ring
    b.add([new_job("q", "j", {}, {}) for _ in range(100)])
    assert b.counts("q")[JobState.WAITING] == 101


def test_close_returns_the_spare_connection(pg: Any) -> None:
    b = pg()
    add(b)
    assert b._spare is not None
    b.close()
    assert b._spare is None and b._pool.closed


# -- races between brokers ----------------------------------------------------------------
def test_two_brokers_adding_one_job_id_admit_it_once(pg: Any) -> None:
    brokers = [pg(), pg()]
    for round_ in range(15):
        jid = f"job-{round_}"
        got = _race(2, lambda i, jid=jid: add(brokers[i], job_id=jid))
        assert all(not isinstance(g, Exception) for g in got), got
        assert {g.id for g in got} == {jid}
    assert brokers[0].counts("q")[JobState.WAITING] == 15


def test_two_brokers_adding_one_unique_key_admit_one_job(pg: Any) -> None:
    brokers = [pg(), pg()]
    for round_ in range(15):
        key = f"k-{round_}"
        got = _race(2, lambda i, key=key: add(brokers[i], unique_key=key))
        ok = [g for g in got if not isinstance(g, Exception)]
        dup = [g for g in got if isinstance(g, DuplicateJob)]
        assert len(ok) == 1 and len(dup) == 1, got
    assert brokers[0].counts("q")[JobState.WAITING] == 15


def test_last_two_children_completing_at_once_wake_the_parent(pg: Any) -> None:
    brokers = [pg(), pg()]
    for _ in range(15):
        kids = [add(brokers[0], queue="kids"), add(brokers[0], queue="kids")]
        parent = add(brokers[0], queue="parents", depends_on=[k.id for k in kids])
        leases = [brokers[i].lease("kids", 1, 30_000)[0] for i in range(2)]
        got = _race(2, lambda i, leases=leases: brokers[i].complete(leases[i], i))
        assert got == [Settle.OK, Settle.OK]
        assert brokers[1].get_job(parent.id).state is JobState.WAITING


def test_a_dependent_added_while_its_dependency_completes_is_never_stuck(pg: Any) -> None:
    brokers = [pg(), pg()]
    for _ in range(15):
        dep = add(brokers[0], queue="deps")
        lease = brokers[0].lease("deps", 1, 30_000)[0]
        got = _race(2, lambda i, lease=lease, dep=dep: brokers[i].complete(lease) if i == 0
                    else add(brokers[1], queue="after", depends_on=[dep.id]))  # fmt: skip
        assert got[0] is Settle.OK
        assert brokers[0].get_job(got[1].id).state is JobState.WAITING


def test_concurrency_limit_holds_across_brokers(pg: Any) -> None:
    brokers = [pg(), pg(), pg()]
    brokers[0].set_limits("q", QueueLimits(concurrency=3))
    brokers[0].add([new_job("q", "job", None, {}) for _ in range(30)])
    got = _race(3, lambda i: len(brokers[i].lease("q", 5, 30_000)))
    assert sum(got) == 3


# -- admission paths ----------------------------------------------------------------------
def test_bulk_copy_path_keeps_order_and_a_replay_adds_nothing(pg: Any) -> None:
    b = pg()
    jobs = [new_job("q", "job", {"n": i}, {}) for i in range(300)]
    assert [j.id for j in b.add(jobs)] == [j.id for j in jobs]
    assert [j.id for j in b.add(jobs)] == [j.id for j in jobs]  # replay: ids already there
    assert b.counts("q")[JobState.WAITING] == 300
    leased = b.lease("q", 300, 30_000)
    assert [lease.job.data["n"] for lease in leased] == list(range(300))


def test_text_postgres_cannot_store_is_a_validation_error(pg: Any) -> None:
    b = pg()
    with pytest.raises(ValidationError):
        add(b, name="nul\x00name")
    with pytest.raises(ValidationError):
        add(b, priority=2**31)


# -- faults -------------------------------------------------------------------------------
def test_driver_errors_are_translated_with_their_cause() -> None:
    cases = [(psycopg.errors.UniqueViolation(), DuplicateJob),
             (psycopg.OperationalError("down"), BackendUnavailable),
             (psycopg.errors.SyntaxError(), BackendError)]  # fmt: skip
    for raw, kind in cases:
        with pytest.raises(kind) as info, translate_errors():
            raise raw
        assert info.value.__cause__ is raw


def test_terminated_connections_are_survived(pg: Any) -> None:
    b = pg({"application_name": "bunq_term_test", "pool_min": 2})
    add(b)
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        n = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                         " WHERE application_name = 'bunq_term_test'").fetchone()[0]  # fmt: skip
    assert n >= 1
    add(b)
    assert b.counts("q")[JobState.WAITING] == 2
    lease = b.lease("q", 2, 30_000)
    assert [b.complete(le) for le in lease] == [Settle.OK, Settle.OK]


def test_unreachable_server_is_backend_unavailable_after_retries() -> None:
    start = time.monotonic()
    with pytest.raises(BackendUnavailable) as info:
        PostgresBackend("postgresql://127.0.0.1:1/test?connect_timeout=1", retry_ms=600)
    assert time.monotonic() - start < 10
    assert info.value.__cause__ is not None


def test_closed_backend_is_unavailable(pg: Any) -> None:
    b = pg()
    b.close()
    with pytest.raises(BackendUnavailable):
        b.counts("q")
    assert b.wait("q", 10) is False
