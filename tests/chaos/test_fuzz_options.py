"""Hypothesis fuzz of the Python API's values over every backend (issue 12).

Each example makes the same call on every backend: SQLite, the memory engine
written behind to a file, PostgreSQL, ``remote`` (a RemoteBackend talking to
``bunq serve``'s app over a memory engine with a data file) and, where the
API applies, SQS on moto. Every call must either succeed, with the job read
back identically, or raise a :mod:`bunq.errors` error whose code is the same
on every backend. Any other exception is a failure (and shrunk to a minimal
example). SQS takes part where it has the feature: when the others refuse a
value, SQS refuses it with the same code; when they accept it, SQS accepts it
or answers ``unsupported`` (or ``config`` for a queue name SQS cannot hold).

Backends that need a service are left out with a printed reason, unless
``BUNQ_REQUIRE_BACKENDS`` names them (CI), in which case their absence fails.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bunq import BunqError, Queue
from bunq.backends import connect
from bunq.backends.base import Capability
from bunq.job import Backoff, JobOptions, NewJob, UniqueStrategy, new_job_id
from bunq.validate import MAX_DURATION_MS

REQUIRED = {b.strip() for b in os.environ.get("BUNQ_REQUIRE_BACKENDS", "").split(",") if b}
PG_DSN = os.environ.get("BUNQ_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("BUNQ_REDIS_URL", "redis://127.0.0.1:6379/0")
EXAMPLES = int(os.environ.get("BUNQ_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])  # fmt: skip
_names = (f"fz{i}" for i in itertools.count())


# ------------------------------------------------------------------------- backends


def _absent(name: str, why: str, skipped: dict[str, str]) -> None:
    if name in REQUIRED:
        pytest.fail(f"backend {name} is required (BUNQ_REQUIRE_BACKENDS) but {why}")
    skipped[name] = why


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from bunq.backends.remote import RemoteBackend
    from bunq.server.app import BackgroundServer
    from bunq.server.context import ServerConfig

    tmp = tmp_path_factory.mktemp("fuzz")
    made: dict[str, Any] = {
        "sqlite": connect(f"sqlite:///{tmp / 'fuzz.db'}"),
        "memory": connect(f"memory://?data={tmp / 'engine.db'}"),
    }
    skipped: dict[str, str] = {}
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        import psycopg

        psycopg.connect(PG_DSN, connect_timeout=3).close()
        sep = "&" if "?" in PG_DSN else "?"
        made["postgres"] = connect(f"{PG_DSN}{sep}schema={schema}")
    except Exception as exc:  # any failure means no server
        _absent("postgres", f"cannot reach {PG_DSN}: {exc}", skipped)
    try:
        from backends.sqs import moto_server

        made["sqs"] = connect(moto_server.sqs_url())
    except Exception as exc:  # moto missing or not starting
        _absent("sqs", f"moto's server is not available: {exc}", skipped)
    redis_prefix = f"fuzz{uuid.uuid4().hex[:8]}"
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
        sep = "&" if "?" in REDIS_URL else "?"
        made["redis"] = connect(f"{REDIS_URL}{sep}prefix={redis_prefix}")
    except Exception as exc:  # redis-py missing or no server
        _absent("redis", f"cannot reach {REDIS_URL}: {exc}", skipped)
    served = connect(f"memory://?data={tmp / 'served.db'}")
    server = BackgroundServer(served, ServerConfig(port=0, http_port=None, sweep_interval=3600.0,
                                                   cron_interval=3600.0),
                              close_backend=True).start()  # fmt: skip
    made["remote"] = RemoteBackend("127.0.0.1", server.port, timeout=10.0)
    if skipped:
        print(f"\nfuzz: backends left out: {skipped}")
    yield made
    for backend in made.values():
        backend.close()
    server.stop()
    if "redis" in made:
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"*{redis_prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    if "postgres" in made:
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# ------------------------------------------------------------------------ strategies

BOUNDARY_INTS = [0, 1, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 10_000, 10_001,
                 MAX_DURATION_MS, MAX_DURATION_MS + 1, 2**53, 2**62, 2**63 - 1, 2**63,
                 2**64 - 1, 2**64, 10**30, -(2**63), -(2**64)]  # fmt: skip
ODD_TEXT = ["", " ", "\x00", "a\x00b", "q\n", "\n", "\ud800", "x\udcff", "é" * 129,
            "a" * 256, "a" * 257, "😀" * 64, "😀" * 65, "‮rtl", "\u200b", "k" * 1024,
            "k" * 1025, "ü" * 512, "ü" * 513]  # fmt: skip
odd_text = st.one_of(st.sampled_from(ODD_TEXT), st.text(st.characters(exclude_categories=()),
                                                         max_size=40))  # fmt: skip
wrong = st.sampled_from([None, True, 1.5, float("inf"), float("nan"), b"bytes", [], {}, 3])
odd_int = st.one_of(st.sampled_from(BOUNDARY_INTS), st.integers(), st.integers(-5, 5))
anything = st.one_of(odd_int, odd_text, wrong)

OPTIONS = {
    "priority": anything,
    "delay": st.one_of(odd_int, wrong),
    "attempts": st.one_of(odd_int, wrong),
    "backoff": st.one_of(
        odd_int,
        wrong,
        st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(["fixed", "exponential", "linear", 1]),
                "delay": odd_int,
                "cap": st.one_of(st.none(), odd_int),
                "jitter": st.one_of(st.floats(), odd_int),
            },
        ),
    ),  # fmt: skip
    "job_id": st.one_of(odd_text, wrong),
    "unique_key": st.one_of(odd_text, wrong),
    "unique_strategy": st.one_of(st.sampled_from(["reject", "extend", "replace", "maybe"]), wrong),
    "unique_ttl": st.one_of(odd_int, wrong),
    "lifo": st.one_of(st.booleans(), wrong),
    "ttl": st.one_of(odd_int, wrong),
    "timeout": st.one_of(odd_int, wrong),
    "group": st.one_of(odd_text, wrong),
    "durable": st.one_of(st.booleans(), wrong),
    "remove_on_complete": st.one_of(st.booleans(), wrong),
}
options = st.fixed_dictionaries({}, optional=OPTIONS)
json_like = st.recursive(
    st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), odd_int, odd_text,
              st.binary(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(odd_text, inner, max_size=4)),
    max_leaves=8,
)  # fmt: skip


# --------------------------------------------------------------------------- outcomes


def _view(job: Any) -> tuple[Any, ...]:
    """What must read back identically on every backend (clock-free)."""
    state = "waiting" if job.state.value == "delayed" else job.state.value  # by the wall clock
    return (job.queue, job.name, job.data, state, job.opts.to_dict(), job.run_at - job.created_at)


def _outcome(kind: str, backend: Any, call: Any) -> tuple[str, Any]:
    try:
        job = call(backend)
    except BunqError as exc:
        return ("error", exc.code)
    except Exception as exc:  # the finding: an untyped error escaped
        return ("crash", f"{kind}: {type(exc).__name__}: {exc}"[:300])
    if job is None or Capability.GET_JOB not in backend.capabilities:
        return ("ok", None)
    got = backend.get_job(job.id)
    if got is None:
        return ("lost", f"{kind}: job {job.id} acknowledged but not found")
    return ("ok", _view(got))


def _compare(backends: dict[str, Any], call: Any) -> dict[str, tuple[str, Any]]:
    results = {k: _outcome(k, b, call) for k, b in backends.items()}
    crashes = [r for r in results.values() if r[0] in ("crash", "lost")]
    assert not crashes, crashes
    core = {k: r for k, r in results.items() if k != "sqs"}
    assert len({r[0] for r in core.values()}) == 1, results
    first = next(iter(core.values()))
    if first[0] == "error":
        assert len({r[1] for r in core.values()}) == 1, results
    else:
        views = {k: r[1] for k, r in core.items()}
        assert len({repr(v) for v in views.values()}) == 1, views
    if "sqs" in results:
        sqs = results["sqs"]
        if first[0] == "error" and first[1] in ("validation", "config", "payload_too_large"):
            assert sqs == first, results
        elif first[0] == "ok":
            # SQS lacks some features, and its queue names allow no ``.`` or ``:``
            # (docs/sqs.md): those are refused there, typed, and nothing else is.
            assert sqs[0] == "ok" or sqs in (("error", "unsupported"), ("error", "config")), results
    return results


def _none(_: object) -> None:
    return None


# ------------------------------------------------------------------------------ tests


@FUZZ
@given(name=st.one_of(odd_text, wrong), data=json_like, opts=options)
def test_queue_add_is_the_same_everywhere(backends: dict[str, Any], name: Any, data: Any,
                                          opts: dict[str, Any]) -> None:  # fmt: skip
    queue = next(_names)
    _compare(backends, lambda b: Queue(queue, b).add(name, data, **opts))
    for b in backends.values():
        if Capability.GET_JOB in b.capabilities:
            Queue(queue, b).obliterate(force=True)  # job ids are global: free them


RAW_FIELDS = {
    "priority": odd_int,
    "delay": odd_int,
    "attempts": odd_int,
    "ttl": st.one_of(st.none(), odd_int),
    "timeout": st.one_of(st.none(), odd_int),
    "unique_ttl": st.one_of(st.none(), odd_int),
    "job_id": st.one_of(st.none(), odd_text),
    "group": st.one_of(st.none(), odd_text),
    "parent_id": st.one_of(st.none(), odd_text),
    "backoff": st.builds(Backoff, st.sampled_from(["fixed", "exponential"]), odd_int),
}


@FUZZ
@given(queue=st.one_of(odd_text, st.sampled_from(["q", "Q-1.a:b_c"]), wrong),
       name=odd_text, raw=st.fixed_dictionaries({}, optional=RAW_FIELDS))  # fmt: skip
def test_backend_add_checks_options_built_without_parse(
    backends: dict[str, Any], queue: Any, name: Any, raw: dict[str, Any]
) -> None:
    """A NewJob with options built directly (no JobOptions.parse): every backend
    applies the same checks (bunq.job.check_new_jobs) before storing anything."""
    opts = JobOptions(**raw, unique_strategy=UniqueStrategy.REJECT)
    jid = raw.get("job_id") or new_job_id()
    _compare(backends, lambda b: b.add([NewJob(queue, name, 1, opts, jid)])[0])
    for b in backends.values():
        if Capability.GET_JOB in b.capabilities and isinstance(queue, str) and queue:
            try:
                Queue(queue, b).obliterate(force=True)
            except BunqError:
                pass


@FUZZ
@given(state=st.one_of(st.sampled_from(["waiting", "delayed", "bogus", "failed", "paused",
                                        "WAITING", "active\n"]), wrong),
       offset=st.one_of(odd_int, wrong), limit=st.one_of(odd_int, wrong))  # fmt: skip
def test_listings_refuse_the_same_values(backends: dict[str, Any], state: Any, offset: Any,
                                         limit: Any) -> None:  # fmt: skip
    listing = {k: b for k, b in backends.items() if Capability.LIST_JOBS in b.capabilities}
    _compare(listing, lambda b: _none(Queue("fz-list", b).get_jobs(state, offset, limit)))


@FUZZ
@given(dlq=st.fixed_dictionaries({}, optional={
           "max_entries": st.one_of(odd_int, wrong), "max_age": st.one_of(odd_int, wrong),
           "auto_retry": st.one_of(st.booleans(), wrong),
           "auto_retry_interval": st.one_of(odd_int, wrong),
           "max_auto_retries": st.one_of(odd_int, wrong)}),
       rate=st.tuples(st.one_of(odd_int, wrong), st.one_of(odd_int, wrong)))  # fmt: skip
def test_queue_settings_refuse_the_same_values(backends: dict[str, Any], dlq: dict[str, Any],
                                               rate: tuple[Any, Any]) -> None:  # fmt: skip
    dlq_capable = {k: b for k, b in backends.items()
                   if Capability.DLQ in b.capabilities and k != "sqs"}  # fmt: skip
    _compare(dlq_capable, lambda b: _none(Queue("fz-set", b).dlq.config(**dlq)))
    limited = {k: b for k, b in backends.items() if Capability.RATE_LIMIT in b.capabilities}
    _compare(limited, lambda b: Queue("fz-set", b).rate_limit(*rate))
    for b in backends.values():  # a sweep still works for every queue afterwards
        b.sweep()
