"""Capability-aware contract tests: ``@requires(Capability.X, ...)``.

A test marked ``requires(...)`` runs unchanged on a backend that has every
capability it lists. On a backend that lacks one:

- a **refused** capability (the backend raises UnsupportedError for it):
  the test still runs, and must end in an UnsupportedError whose
  ``data["feature"]`` is one of the missing capabilities' values. Passing
  (a silent no-op) or failing any other way is a test failure; assertions
  before the refused call still have to hold.
- a **degraded** capability (the backend does the operation, only less
  exactly: approximate counts, server-side timers): the test is skipped with
  the reason, since there is no refusal to check and its assertions assume
  the exact behaviour. This rule wins over the first.

``CLOCK`` (every timer follows the injected clock, to the ms) and
``HISTORY`` (every attempt is kept) are capabilities SQS only approximates.

tests/contract/conftest.py imports :func:`pytest_pyfunc_call`, which
applies the rules; the ``requires`` marker is registered in pyproject.toml.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any

import pytest

from bunq.backends.base import Capability
from bunq.errors import UnsupportedError

CLOCK: Any = getattr(Capability, "CLOCK", "clock")
HISTORY: Any = getattr(Capability, "HISTORY", "history")
DEGRADED = frozenset({CLOCK, HISTORY, Capability.EXACT_COUNTS, Capability.LONG_DELAY,
                      Capability.RESULTS, Capability.MULTI_PROCESS})  # fmt: skip
MARKER = "requires(*capabilities): the test needs these backend capabilities (see capability.py)"


def requires(*caps: Any) -> pytest.MarkDecorator:
    """Mark a test as needing ``caps`` (Capability members, or ``CLOCK``/``HISTORY``)."""
    mark: pytest.MarkDecorator = pytest.mark.requires(*caps)
    return mark


def has(backend: Any, cap: Any) -> bool:
    """Return whether ``backend`` has ``cap`` (proposed capabilities: every backend but SQS)."""
    if isinstance(cap, Capability):
        return cap in backend.capabilities
    return bool(backend.kind != "sqs")


def name(cap: Any) -> str:
    return cap.value if isinstance(cap, Capability) else str(cap)


def lacking(backend: Any, caps: Iterable[Any]) -> tuple[set[str], set[str]]:
    """Return (refused, degraded) capability names ``backend`` lacks among ``caps``."""
    missing = [c for c in caps if not has(backend, c)]
    refused = {name(c) for c in missing if c not in DEGRADED}
    return refused, {name(c) for c in missing if c in DEGRADED}


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, Any, Any]:
    """Run ``requires``-marked tests per the rules above."""
    backend: Any = pyfuncitem.funcargs.get("backend")
    caps = [c for m in pyfuncitem.iter_markers("requires") for c in m.args]
    if backend is None or not caps:
        return (yield)
    refused, degraded = lacking(backend, caps)
    if degraded:
        pytest.skip(f"{backend.kind} has no {sorted(degraded)}: the test needs exact "
                    "behaviour the backend only approximates")  # fmt: skip
    if not refused:
        return (yield)
    try:
        result = yield
    except UnsupportedError as exc:
        feature = exc.data.get("feature")
        if feature in refused:
            return True
        raise AssertionError(f"UnsupportedError names {feature!r}; the test lacks "
                             f"{sorted(refused)}: {exc}") from exc  # fmt: skip
    pytest.fail(f"backend {backend.kind!r} lacks {sorted(refused)} but the test ran to the end "
                "without UnsupportedError: a silent no-op?", pytrace=False)  # fmt: skip
    return result
