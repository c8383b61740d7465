"""Backend URLs for the chaos suite: each test gets a fresh store, dropped afterwards.

Missing services skip, or fail when ``BUNQ_REQUIRE_BACKENDS`` names them (CI).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from chaos.serve import Served

BACKENDS = ["sqlite", "postgres", "sqs", "remote"]


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL on a fresh schema (``application_name`` tags its connections)."""
    import psycopg
    from conftest import PG_DSN, missing

    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except Exception as exc:  # any failure means no server
        missing("postgres", f"cannot reach {PG_DSN}: {exc}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_DSN else "?"
    yield f"{PG_DSN}{sep}schema={schema}&application_name=bunq_{schema}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[str], Served]]:
    """Return ``serve(backend_url)``: a started ``bunq serve`` child, stopped after the test."""
    started: list[Served] = []

    def start(backend: str) -> Served:
        served = Served(tmp_path, backend)
        started.append(served)
        return served.start()

    yield start
    for served in started:
        served.stop()


@pytest.fixture
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh store on the backend the test is parametrized with."""
    kind = request.param
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'chaos.db'}"
    elif kind == "postgres":
        yield request.getfixturevalue("pg_url")
    elif kind == "sqs":
        from backends.sqs import moto_server
        from conftest import missing

        try:
            yield moto_server.sqs_url()
        except moto_server.MotoMissing as exc:
            missing("sqs", str(exc))
    else:  # remote: bunq serve (its default memory engine + write-behind) in a child process
        serve = request.getfixturevalue("serve")
        yield serve(f"memory://?data={tmp_path / 'served.db'}").url
