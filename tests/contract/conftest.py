"""The contract suite runs every test once per backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

BACKENDS = [
    "sqlite",
    "memory",
    pytest.param("postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend(kind: str, make_backend: Callable[..., Any], clock: Any) -> Any:
    return make_backend(kind, clock=clock)
