"""Compatibility tests: bunqueue's own clients against ``bunq serve``.

The clients come from the package registries (PyPI ``bunqueue-client``; npm
``bunqueue`` run with ``bun``, installed by ``npm ci`` in tests/compat/js).
A missing client skips, unless ``BUNQ_REQUIRE_COMPAT=1`` (CI), where it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from bunq.backends.sql.sqlite import SQLiteBackend
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig

REQUIRED = os.environ.get("BUNQ_REQUIRE_COMPAT", "") not in ("", "0")
TOKEN = "compat-secret"


def missing(what: str) -> None:
    if REQUIRED:
        pytest.fail(f"{what} is required (BUNQ_REQUIRE_COMPAT) but missing")
    pytest.skip(f"{what} is not installed")


def _serve(tmp_path: Any, tokens: tuple[str, ...] = ()) -> Iterator[BackgroundServer]:
    backend = SQLiteBackend(str(tmp_path / "compat.db"))
    cfg = ServerConfig(port=0, http_port=None, tokens=tokens, sweep_interval=0.2)
    with BackgroundServer(backend, cfg, close_backend=True) as srv:
        yield srv


@pytest.fixture
def compat_server(tmp_path: Any) -> Iterator[BackgroundServer]:
    """A server on SQLite that sweeps expired leases every 0.2 s (so heartbeats matter)."""
    yield from _serve(tmp_path)


@pytest.fixture
def auth_server(tmp_path: Any) -> Iterator[BackgroundServer]:
    """The same, requiring ``Auth {token: TOKEN}``."""
    yield from _serve(tmp_path, (TOKEN,))
