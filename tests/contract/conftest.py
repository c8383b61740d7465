"""The contract suite runs every test once per backend.

A test marked ``@requires(...)`` states the capabilities it needs; on a
backend lacking one it must end in UnsupportedError (or is skipped, for
capabilities a backend only approximates): see capability.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from contract.capability import pytest_pyfunc_call  # noqa: F401 - applies @requires

BACKENDS = [
    "sqlite",
    "memory",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("sqs", marks=pytest.mark.sqs),
    pytest.param("redis", marks=pytest.mark.redis),
    "remote",
]


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def clock(kind: str, clock: Any) -> Any:
    """The fake clock (tests/conftest.py); SQS's timers run on the server: the wall clock."""
    if kind == "sqs":
        from backends.sqs.moto_server import WallClock

        return WallClock()
    return clock


@pytest.fixture
def backend(kind: str, make_backend: Callable[..., Any], clock: Any) -> Any:
    return make_backend(kind, clock=clock)
