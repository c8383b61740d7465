"""Fixtures for PostgreSQL-specific tests: a fresh schema per test, dropped afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import PG_DSN, missing


def _reachable() -> None:
    try:
        import psycopg

        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except Exception as exc:  # any failure means no server
        missing("postgres", f"cannot reach {PG_DSN}: {exc}")


@pytest.fixture
def pg_url() -> Iterator[Callable[..., str]]:
    """Return ``url(**options)`` for one fresh schema; every schema made is dropped."""
    _reachable()
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"

    def url(**options: Any) -> str:
        opts = {"schema": schema, **options}
        sep = "&" if "?" in PG_DSN else "?"
        return PG_DSN + sep + "&".join(f"{k}={v}" for k, v in opts.items())

    yield url
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def pg(pg_url: Callable[..., str]) -> Iterator[Callable[..., Any]]:
    """Return ``open(**kw)``: a PostgresBackend on the test's schema, closed afterwards."""
    from bunq.backends import connect

    made: list[Any] = []

    def open_(url_options: dict[str, Any] | None = None, **kw: Any) -> Any:
        backend = connect(pg_url(**(url_options or {})), **kw)
        made.append(backend)
        return backend

    yield open_
    for backend in made:
        backend.close()
