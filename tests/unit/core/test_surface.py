"""Both implementations expose one surface; selection honours the environment."""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import bunq
import bunq._core

CLASSES = [
    ("heap", "IndexedHeap"),
    ("minheap", "MinHeap"),
    ("skiplist", "SkipList"),
    ("lru", "LRUCache"),
    ("lru", "BoundedSet"),
    ("bucket", "TokenBucket"),
    ("bucket", "SlidingWindow"),
    ("record", "Record"),
    ("slots", "SlotBuilder"),
]
FUNCTIONS = [("routing", "fnv1a_32"), ("routing", "shard_count"), ("routing", "shard_for")]
PRIVATE_SURFACE = ("_check", "__len__", "__contains__", "__iter__")
MODULES = ("heap", "minheap", "routing", "skiplist", "lru", "bucket", "record", "slots")


def flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def surface(cls: type) -> set[str]:
    public = {n for n in dir(cls) if not n.startswith("_")}
    return public | {n for n in PRIVATE_SURFACE if hasattr(cls, n)}


def params(fn: Any) -> list[tuple[str, Any, Any]]:
    sig = inspect.signature(fn)
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def init_params(cls: type) -> list[tuple[str, Any]]:
    """Return (name, default) of ``__init__`` without ``self``.

    ``inspect.signature`` cannot read a Cython class's ``__init__`` (a slot
    wrapper), so for compiled classes the parameters come from the signature
    line that ``embedsignature`` writes at the top of the class docstring;
    names and defaults are compared, C types are ignored.
    """
    try:
        return [(p.name, p.default) for p in inspect.signature(cls).parameters.values()]
    except ValueError:
        pass
    first = (cls.__doc__ or "").splitlines()[0]
    match = re.fullmatch(rf"{cls.__name__}\((.*)\)", first)
    assert match, f"no embedded signature in {cls.__name__}.__doc__: {first!r}"
    out = []
    for part in filter(None, (p.strip() for p in match.group(1).split(","))):
        decl, _, default = part.partition("=")
        name = decl.split()[-1]
        out.append((name, ast.literal_eval(default) if default else inspect.Parameter.empty))
    return out


def twins(both: tuple[SimpleNamespace, SimpleNamespace], module: str, name: str) -> list[Any]:
    """Return [compiled, pure] of ``module.name``."""
    return [getattr(getattr(ns, module), name) for ns in both]


@pytest.mark.parametrize(("module", "name"), CLASSES)
def test_surface_classes_match(
    both: tuple[SimpleNamespace, SimpleNamespace], module: str, name: str
) -> None:
    compiled, pure = twins(both, module, name)
    assert surface(compiled) == surface(pure)
    assert init_params(compiled) == init_params(pure)
    for attr in sorted(surface(pure) - {"__len__", "__contains__", "__iter__"}):
        c, p = getattr(compiled, attr), getattr(pure, attr)
        if not callable(p):  # a property or slot on one side, a property on the other
            assert not callable(c), attr
            continue
        assert params(c) == params(p), f"{name}.{attr}"


@pytest.mark.parametrize(("module", "name"), FUNCTIONS)
def test_surface_functions_match(
    both: tuple[SimpleNamespace, SimpleNamespace], module: str, name: str
) -> None:
    compiled, pure = twins(both, module, name)
    assert params(compiled) == params(pure)


@pytest.mark.parametrize(("module", "name"), CLASSES)
def test_surface_compiled_classes_are_final(
    both: tuple[SimpleNamespace, SimpleNamespace], module: str, name: str
) -> None:
    cls = getattr(getattr(both[0], module), name)
    with pytest.raises(TypeError):
        type("Sub", (cls,), {})


@pytest.mark.parametrize(("module", "name"), CLASSES + FUNCTIONS)
def test_surface_docstring_examples_run(impl: SimpleNamespace, module: str, name: str) -> None:
    obj = getattr(getattr(impl, module), name)
    globs = {n: getattr(getattr(impl, m), n) for m, n in CLASSES + FUNCTIONS}
    test = doctest.DocTestParser().get_doctest(obj.__doc__ or "", globs, name, None, 0)
    assert test.examples, f"{name} has no doctest"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_surface_reexports_follow_implementation(builds: SimpleNamespace) -> None:
    chosen = builds.compiled if bunq._core.IMPLEMENTATION == "cython" else builds.pure
    assert chosen is not None
    for module, name in CLASSES + FUNCTIONS:
        assert getattr(bunq._core, name) is getattr(getattr(chosen, module), name)
    assert set(bunq._core.__all__) == {n for _, n in CLASSES + FUNCTIONS} | {"IMPLEMENTATION"}


def _implementation_in_subprocess(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    root = str(Path(bunq.__file__).resolve().parent.parent)  # where this run imports bunq from
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))}
    code = "import bunq._core as c; print(c.IMPLEMENTATION)"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("BUNQ_PUREPYTHON", "BUNQ_REQUIRE_COMPILED")
    }
    return {**env, **extra}


def test_implementation_follows_environment(builds: SimpleNamespace) -> None:
    """IMPLEMENTATION is "cython" under BUNQ_REQUIRE_COMPILED, "python" under BUNQ_PUREPYTHON."""
    proc = _implementation_in_subprocess(dict(os.environ))
    if flag("BUNQ_PUREPYTHON"):
        expected = "python"
    elif flag("BUNQ_REQUIRE_COMPILED"):
        expected = "cython"
    else:
        expected = "cython" if builds.compiled is not None else "python"
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected
    assert bunq._core.IMPLEMENTATION == expected


def test_implementation_purepython_forces_twin() -> None:
    proc = _implementation_in_subprocess(_clean_env(BUNQ_PUREPYTHON="1", BUNQ_REQUIRE_COMPILED="1"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "python"


def test_implementation_require_compiled_never_falls_back(builds: SimpleNamespace) -> None:
    proc = _implementation_in_subprocess(_clean_env(BUNQ_REQUIRE_COMPILED="1"))
    if builds.compiled is None:
        assert proc.returncode != 0 and "BUNQ_REQUIRE_COMPILED" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "cython"


def test_core_imports_nothing_from_bunq() -> None:
    """_core is leaf code: no module in it imports the rest of bunq."""
    core = Path(bunq._core.__file__).parent
    pattern = re.compile(r"^\s*(from|import|cimport)\s+bunq(?!\._core)|^\s*from\s+\.\.(?!\w)", re.M)
    for path in sorted(core.rglob("*")):
        if path.suffix in (".py", ".pyx", ".pxd", ".pyi"):
            assert not pattern.search(path.read_text()), path


@pytest.mark.parametrize("module", MODULES)
def test_pure_modules_are_importable_alone(module: str) -> None:
    assert importlib.import_module(f"bunq._core._pure.{module}")


def test_heaps_share_one_abstract_engine(both: tuple[SimpleNamespace, SimpleNamespace]) -> None:
    compiled = both[0]
    base = importlib.import_module("bunq._core._heapbase").HeapBase
    assert issubclass(compiled.heap.IndexedHeap, base)
    assert issubclass(compiled.minheap.MinHeap, base)
    with pytest.raises(TypeError):
        base()
