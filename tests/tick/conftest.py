"""Fixtures for tick() tests: a SQLite backend on a fake clock, and a faulty wrapper."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bunq.errors import BackendUnavailable
from bunq.queue import Queue


class Faulty:
    """Delegate to a real backend, raising ``error`` from the methods named in ``fail``."""

    def __init__(self, inner: Any, fail: set[str], error: Exception | None = None) -> None:
        self._inner, self._fail = inner, fail
        self._error = error or BackendUnavailable("injected: the database went away")
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._fail:
            return attr

        def boom(*a: Any, **kw: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            raise self._error

        return boom


@pytest.fixture
def faulty() -> type[Faulty]:
    return Faulty


@pytest.fixture
def backend(make_backend: Callable[..., Any], clock: Any) -> Any:
    return make_backend("sqlite", clock=clock)


@pytest.fixture
def q(backend: Any) -> Queue:
    return Queue("t", backend)
