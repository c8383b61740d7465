"""Shared fixtures: a fake clock and backend factories for every real backend.

Backends that need a service (PostgreSQL, moto's SQS) skip with a reason when
the service is missing, unless ``BUNQ_REQUIRE_BACKENDS`` names them (CI sets
it), in which case a missing service fails the test.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from server.remote_factory import _remote

from bunq.job import now_ms

REQUIRED = {b.strip() for b in os.environ.get("BUNQ_REQUIRE_BACKENDS", "").split(",") if b.strip()}
PG_DSN = os.environ.get("BUNQ_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("BUNQ_REDIS_URL", "redis://127.0.0.1:6379/0")


class FakeClock:
    """A settable epoch-ms clock: tests advance time instead of sleeping."""

    def __init__(self, start: int | None = None) -> None:
        self.now = start if start is not None else now_ms()

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def required_tool(name: str, package: str | None = None) -> str:
    """The path of command ``name``; skip without it, or fail in CI (which installs it)."""
    import shutil

    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is required in CI (pip install {package or name})")
        pytest.skip(f"{name} is not installed")
    return path


def missing(name: str, why: str) -> None:
    """Skip (or fail, when the backend is required) for a missing service."""
    if name in REQUIRED:
        pytest.fail(f"backend {name} is required (BUNQ_REQUIRE_BACKENDS) but {why}")
    pytest.skip(f"{name}: {why}")


def _sqlite(tmp_path: Any, **kw: Any) -> Any:
    from bunq.backends.sql.sqlite import SQLiteBackend

    return SQLiteBackend(str(tmp_path / f"bunq-{uuid.uuid4().hex[:8]}.db"), **kw)


def _memory(tmp_path: Any, **kw: Any) -> Any:
    from bunq.backends import connect

    return connect("memory://", **kw)


def _postgres(tmp_path: Any, **kw: Any) -> Any:
    try:
        import psycopg

        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except Exception as exc:  # any failure means no server
        missing("postgres", f"cannot reach {PG_DSN}: {exc}")
    from bunq.backends import connect

    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_DSN else "?"
    backend = connect(f"{PG_DSN}{sep}schema={schema}", **kw)
    backend._test_schema = schema  # type: ignore[attr-defined]
    return backend


def _drop_pg_schema(backend: Any) -> None:
    schema = getattr(backend, "_test_schema", None)
    if schema:
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _redis(tmp_path: Any, **kw: Any) -> Any:
    """A Redis backend under a fresh key prefix; its keys are deleted on close."""
    if importlib.util.find_spec("redis") is None:
        missing("redis", "redis-py is not installed (extra 'redis')")
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except Exception as exc:  # any failure means no server
        missing("redis", f"cannot reach {REDIS_URL}: {exc}")
    from bunq.backends import connect

    prefix = f"t{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in REDIS_URL else "?"
    backend = connect(f"{REDIS_URL}{sep}prefix={prefix}", **kw)
    backend._test_prefix = prefix  # type: ignore[attr-defined]
    return backend


def drop_redis_keys(backend: Any) -> None:
    """Delete every key of a test backend's prefix (SCAN by pattern; tests only)."""
    prefix = getattr(backend, "_test_prefix", None)
    if prefix:
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        try:
            for pattern in (f"{{{prefix}}}*", f"{{{prefix}:*"):
                batch = list(client.scan_iter(match=pattern, count=1000))
                for i in range(0, len(batch), 500):
                    client.delete(*batch[i : i + 500])
        finally:
            client.close()


def _sqs(tmp_path: Any, **kw: Any) -> Any:
    from backends.sqs import moto_server

    try:
        url = moto_server.sqs_url()  # starts moto's server once (fake credentials)
    except moto_server.MotoMissing as exc:
        missing("sqs", str(exc))
    from bunq.backends import connect

    return connect(url, **kw)


@pytest.fixture(scope="session", autouse=True)
def _stop_moto() -> Iterator[None]:
    yield
    if importlib.util.find_spec("moto") is not None:
        from backends.sqs import moto_server

        moto_server.stop()


FACTORIES: dict[str, Callable[..., Any]] = {
    "sqlite": _sqlite,
    "memory": _memory,
    "postgres": _postgres,
    "sqs": _sqs,
    "redis": _redis,
    "remote": _remote,
}


@pytest.fixture
def make_backend(tmp_path: Any) -> Iterator[Callable[..., Any]]:
    """Return ``make(kind, **kw)``; every backend made is closed afterwards."""
    made: list[Any] = []

    def make(kind: str, **kw: Any) -> Any:
        backend = FACTORIES[kind](tmp_path, **kw)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
        _drop_pg_schema(backend)
        drop_redis_keys(backend)
