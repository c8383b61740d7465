"""Fixtures for server tests: an in-test server, and the contract suite over bunq://."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from server.remote_factory import QUIET, _remote, behind

from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig


@pytest.fixture
def backend(tmp_path: Any, clock: Any) -> Iterator[Any]:
    """The contract suite's ``backend``, as a RemoteBackend over an in-test server."""
    remote = _remote(tmp_path, clock=clock)
    yield remote
    remote.close()


@pytest.fixture
def served(tmp_path: Any) -> Iterator[Any]:
    """A fresh SQLite backend (real clock) for a server under test."""
    b = behind(tmp_path, "sqlite")
    yield b
    b.close()


@pytest.fixture
def server(served: Any) -> Iterator[BackgroundServer]:
    """``bunq serve`` in-process on port 0, no HTTP, no auth."""
    with BackgroundServer(served, ServerConfig(port=0, http_port=None, **QUIET)) as srv:
        yield srv
