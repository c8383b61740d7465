"""Fixtures for the core suite: both implementations, Hypothesis profiles.

Only this suite imports ``bunq._core.<module>`` and ``bunq._core._pure``
directly; everything else goes through ``bunq._core``'s selection.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, settings

MODULES = ("heap", "minheap", "routing", "skiplist", "lru", "bucket", "record", "slots")

settings.register_profile(
    "dev",
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=150,
    stateful_step_count=70,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def flag(name: str) -> bool:
    """Read a BUNQ_* switch the way ``bunq._core`` does (set, non-empty, not "0")."""
    return os.environ.get(name, "") not in ("", "0")


def _load(package: str, name: str) -> SimpleNamespace:
    mods = {m: importlib.import_module(f"{package}.{m}") for m in MODULES}
    return SimpleNamespace(name=name, **mods)


def _load_compiled() -> tuple[SimpleNamespace | None, str]:
    try:
        ns = _load("bunq._core", "cython")
    except ImportError as exc:
        return None, f"compiled core not built ({exc})"
    for m in MODULES:
        path = getattr(ns, m).__file__ or ""
        if not path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            return None, f"bunq._core.{m} is not an extension module: {path}"
    return ns, ""


COMPILED, COMPILED_MISSING = _load_compiled()
PURE = _load("bunq._core._pure", "python")


@pytest.fixture(params=["cython", "python"])
def impl(request: pytest.FixtureRequest) -> Iterator[SimpleNamespace]:
    """Yield one implementation's modules (``impl.heap``, ``impl.lru``, ...).

    The compiled param skips when the extensions are not built, and fails
    instead when ``BUNQ_REQUIRE_COMPILED`` is set.
    """
    if request.param == "python":
        yield PURE
        return
    if COMPILED is None:
        if flag("BUNQ_REQUIRE_COMPILED"):
            pytest.fail(f"BUNQ_REQUIRE_COMPILED is set but {COMPILED_MISSING}")
        pytest.skip(COMPILED_MISSING)
    yield COMPILED


@pytest.fixture(scope="session")
def builds() -> SimpleNamespace:
    """Return ``compiled`` (None when not built), ``pure`` and ``missing`` (why not built)."""
    return SimpleNamespace(compiled=COMPILED, pure=PURE, missing=COMPILED_MISSING)


@pytest.fixture(scope="session")
def both() -> tuple[SimpleNamespace, SimpleNamespace]:
    """Return (compiled, pure) for differential tests; skip/fail like ``impl``."""
    if COMPILED is None:
        if flag("BUNQ_REQUIRE_COMPILED"):
            pytest.fail(f"BUNQ_REQUIRE_COMPILED is set but {COMPILED_MISSING}")
        pytest.skip(COMPILED_MISSING)
    return COMPILED, PURE
