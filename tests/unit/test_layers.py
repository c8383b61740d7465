"""The import graph: imports point down the layers, and packages form no cycle.

model <- _core <- engine <- backends <- drivers <- apps (server, cli, handlers).
Every module under ``bunq/`` and ``handlers/`` is read with :mod:`ast` (nothing
is imported), and every import counts: module level, inside functions (lazy)
and under ``if TYPE_CHECKING`` alike. A new module must be placed in a layer
below (``LAYERS``), so the test fails until its place is decided.
docs/internals/architecture.md describes the layers.
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP = ("bunq", "handlers")

# Lowest first. A module belongs to the first layer one of whose names is the
# module itself or a package containing it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "model",  # values and pure functions every layer may use; no storage
        (
            "bunq.errors",
            "bunq.validate",
            "bunq.job",
            "bunq.queueconfig",
            "bunq.values",
            "bunq.policy",
            "bunq.codec",
            "bunq.protocol",
            "bunq.wire_shapes",
            "bunq.client_link",
            "bunq.settings",
            "bunq.logs",
            "bunq.filekind",
            "bunq.checkpoint",  # with filekind: SQLite file mechanics both bunq files share
            "bunq.tls",
            "bunq.batching",
            "bunq.stacks",
            "bunq.jobrules",
            "bunq.jobevents",
            "bunq.pages",
        ),
    ),
    ("core", ("bunq._core",)),
    ("engine", ("bunq.engine",)),
    ("backends", ("bunq.backends",)),
    (
        "drivers",
        (
            "bunq.queue",
            "bunq.flow",
            "bunq.worker",
            "bunq.tick",
            "bunq.execution",
            "bunq.sqs_events",
            "bunq.cron",
            "bunq.webhooks",
            "bunq.metrics",
            "bunq.tracing",
            "bunq.repeat",
            "bunq.queue_events",
            "bunq",  # the package's re-exports: the public API
        ),
    ),
    ("apps", ("bunq.server", "bunq.cli", "bunq.__main__", "handlers")),
]

# Edges allowed against the rule, each with the reason it still exists.
KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()

# Module-level cycles (any import counts, ``TYPE_CHECKING`` ones too) allowed by edge.
KNOWN_MODULE_CYCLE_EDGES: frozenset[tuple[str, str]] = frozenset()

Graph = Mapping[str, set[str]]


def discover(root: Path = ROOT) -> dict[str, Path]:
    """Every module under the top packages: dotted name -> file."""
    found: dict[str, Path] = {}
    for top in TOP:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, source: str, is_package: bool, known: Iterable[str]) -> set[str]:
    """The known modules ``source`` (module ``name``) imports, wherever the import sits."""
    known = set(known)
    package = name if is_package else name.rpartition(".")[0]

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # ``from pkg import sub`` imports the submodule when there is one
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module
                       for a in node.names]  # fmt: skip
        for target in targets:
            hit = owner(target)
            if hit is not None and hit != name:
                found.add(hit)
    return found


def build_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = discover(root)
    return {
        name: imports_of(name, path.read_text(), path.name == "__init__.py", modules)
        for name, path in modules.items()
    }


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> int:
    for rank, (_, names) in enumerate(layers):
        if any(module == n or module.startswith(n + ".") for n in names if n != "bunq"):
            return rank
        if module in names:  # the bare package ``bunq`` matches only itself
            return rank
    raise LookupError(module)


def upward(graph: Graph, layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> list[str]:
    """Imports from a lower layer into a higher one."""
    return sorted(
        f"{src} ({layers[layer_of(src, layers)][0]}) -> {dst} ({layers[layer_of(dst, layers)][0]})"
        for src, dsts in graph.items()
        for dst in dsts
        if layer_of(dst, layers) > layer_of(src, layers) and (src, dst) not in KNOWN_EXCEPTIONS
    )


def package_of(module: str) -> str:
    """The unit cycles are checked between: a top-level package or module.

    Subpackages count as their top package (``bunq.backends.sql`` is part of
    ``bunq.backends``, whose ``__init__`` may import it). A ``__main__`` is an
    entry point nothing imports, so it is a unit of its own.
    """
    if module.endswith(".__main__"):
        return module
    return ".".join(module.split(".")[:2])


def package_cycle(graph: Graph) -> list[str]:
    """The packages of one import cycle between packages, or [] when there is none."""
    edges: dict[str, set[str]] = {}
    for src, dsts in graph.items():
        a = package_of(src)
        edges.setdefault(a, set()).update(
            package_of(dst) for dst in dsts if (src, dst) not in KNOWN_EXCEPTIONS
        )
        edges[a].discard(a)
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as cycle:
        return sorted(set(cycle.args[1]))
    return []


GRAPH = build_graph()


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in GRAPH:
        try:
            layer_of(module)
        except LookupError:
            unplaced.append(module)
    assert unplaced == [], "add these modules to LAYERS in tests/unit/test_layers.py"


def test_the_graph_is_read_from_the_tree() -> None:
    assert len(GRAPH) > 100
    assert "bunq.job" in GRAPH["bunq.backends.base"]
    assert "bunq.engine" in GRAPH["bunq.backends.embedded"]
    assert "bunq.backends.base" in GRAPH["bunq.queue"]


def test_no_import_points_up() -> None:
    assert upward(GRAPH) == []


def test_no_cycle_between_packages() -> None:
    assert package_cycle(GRAPH) == []


def module_cycle(graph: Graph, allowed: frozenset[tuple[str, str]]) -> list[str]:
    """The modules of one import cycle, or [] when there is none."""
    edges = {src: {dst for dst in dsts if (src, dst) not in allowed} for src, dsts in graph.items()}
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as cycle:
        return sorted(set(cycle.args[1]))
    return []


def test_no_cycle_between_modules_not_even_for_type_checking() -> None:
    # a cycle that exists only for an annotation is solved by a Protocol below
    assert module_cycle(GRAPH, KNOWN_MODULE_CYCLE_EDGES) == []


def test_core_imports_nothing_from_the_rest_of_bunq() -> None:
    outside = {
        f"{src} -> {dst}"
        for src, dsts in GRAPH.items()
        if src.startswith("bunq._core")
        for dst in dsts
        if not dst.startswith("bunq._core")
    }
    assert outside == set()


def test_known_exceptions_still_exist() -> None:
    # a stale exception would hide a new edge of the same name
    for src, dst in KNOWN_EXCEPTIONS | KNOWN_MODULE_CYCLE_EDGES:
        assert dst in GRAPH.get(src, set()), f"delete the exception {src} -> {dst}"


def third_party_importers(library: str, root: Path = ROOT) -> set[str]:
    """Modules that import ``library`` (any form, anywhere in the module)."""
    found = set()
    for name, path in discover(root).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                hit = any(a.name.split(".")[0] == library for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                hit = not node.level and (node.module or "").split(".")[0] == library
            else:
                continue
            if hit:
                found.add(name)
    return found


def test_msgpack_is_imported_only_by_the_codec() -> None:
    # one codec (issue 14 item 5): the rest of bunq takes the msgpack calls from bunq.codec
    assert third_party_importers("msgpack") == {"bunq.codec"}


# -- the checks themselves catch what they are for (synthetic trees) ------------------------

SYNTHETIC = {
    "bunq.job": "from .errors import BunqError\n",
    "bunq.errors": "",
    "bunq.queue": "from .job import Job\n",
    "bunq.engine": "",
    "bunq.engine.shard": (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..queue import Queue\n"
        "def f():\n    import bunq.server.app\n"
    ),
    "bunq.server": "",
    "bunq.server.app": "from ..engine import shard\n",
}


def synthetic_graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    packages = {n for n in sources if any(o.startswith(n + ".") for o in sources)}
    return {n: imports_of(n, s, n in packages, sources) for n, s in sources.items()}


def test_an_upward_import_is_caught_even_lazy_or_for_typing_only() -> None:
    graph = synthetic_graph(SYNTHETIC)
    assert graph["bunq.engine.shard"] == {"bunq.queue", "bunq.server.app"}
    assert graph["bunq.server.app"] == {"bunq.engine.shard"}
    assert upward(graph) == [
        "bunq.engine.shard (engine) -> bunq.queue (drivers)",
        "bunq.engine.shard (engine) -> bunq.server.app (apps)",
    ]
    assert upward(synthetic_graph({**SYNTHETIC, "bunq.engine.shard": ""})) == []


def test_a_cycle_between_packages_is_caught() -> None:
    graph = synthetic_graph(SYNTHETIC)
    assert package_cycle(graph) == ["bunq.engine", "bunq.server"]
    graph["bunq.engine.shard"] = set()
    assert package_cycle(graph) == []


def test_a_cycle_between_modules_is_caught() -> None:
    graph = synthetic_graph(SYNTHETIC)
    assert module_cycle(graph, frozenset()) == ["bunq.engine.shard", "bunq.server.app"]
    assert module_cycle(graph, frozenset({("bunq.server.app", "bunq.engine.shard")})) == []


def test_a_module_outside_every_layer_is_refused() -> None:
    with pytest.raises(LookupError):
        layer_of("bunq.newthing")
