"""FlowProducer: parents with children, and DAGs of named steps.

Everything in one flow is admitted in one atomic ``add``: children first,
then each job after the jobs it depends on. Cycles and unknown dependencies
are found before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .backends import resolve
from .backends.base import Backend, Capability, require
from .errors import DependencyError, ValidationError
from .job import Job, NewJob, new_job_id
from .queue import new_job


@dataclass
class FlowJob:
    """A node of a parent/children tree: the parent waits for all its children."""

    name: str
    queue: str
    data: Any = None
    opts: dict[str, Any] = field(default_factory=dict)
    children: list[FlowJob] = field(default_factory=list)


@dataclass(frozen=True)
class FlowResult:
    """The admitted jobs: ``job`` is the root; ``jobs`` every node by step name or id."""

    job: Job
    jobs: dict[str, Job]


class FlowProducer:
    """Admit flows over one backend."""

    def __init__(self, backend: Backend | str | None = None) -> None:
        self.backend, self._owned = resolve(backend)
        require(self.backend, Capability.FLOWS)

    def close(self) -> None:
        if self._owned:
            self.backend.close()

    def add(self, flow: FlowJob) -> FlowResult:
        """Admit a tree: every child before its parent; the parent waits in waiting-children."""
        ordered: list[NewJob] = []
        self._walk(flow, None, ordered, depth=0)
        jobs = self.backend.add(ordered)
        by_id = {j.id: j for j in jobs}
        return FlowResult(jobs[-1], by_id)

    def _walk(self, node: FlowJob, parent_id: str | None, out: list[NewJob], depth: int) -> str:
        if depth > 100:
            raise DependencyError("flow deeper than 100 levels")
        my_id = node.opts.get("job_id") or new_job_id()
        child_ids = [self._walk(c, my_id, out, depth + 1) for c in node.children]
        opts = {**node.opts, "job_id": my_id}
        if child_ids:
            opts["depends_on"] = [*opts.get("depends_on", ()), *child_ids]
        if parent_id is not None:
            opts["parent_id"] = parent_id
        out.append(new_job(node.queue, node.name, node.data, opts))
        return my_id

    def add_dag(self, queue: str, steps: Mapping[str, Mapping[str, Any]]) -> FlowResult:
        """Admit named steps ``{step: {"data":..., "depends_on": [step...], "opts": {...}}}``.

        Raises DependencyError for a cycle or a dependency on an unknown step,
        before any job is written.
        """
        ids = {name: new_job_id() for name in steps}
        order = _topological(steps)
        batch = []
        for name in order:
            spec = steps[name]
            unknown = set(spec) - {"data", "depends_on", "opts", "name"}
            if unknown:
                raise ValidationError(f"step {name!r}: unknown keys {sorted(unknown)}")
            opts = {**(spec.get("opts") or {}), "job_id": ids[name],
                    "depends_on": [ids[d] for d in spec.get("depends_on", ())]}  # fmt: skip
            batch.append(new_job(queue, spec.get("name", name), spec.get("data"), opts))
        jobs = self.backend.add(batch)
        by_step = dict(zip(order, jobs, strict=True))
        return FlowResult(jobs[-1], by_step)


def _topological(steps: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Order steps so dependencies come first; refuse cycles and unknown steps."""
    for name, spec in steps.items():
        deps = spec.get("depends_on", ())
        if isinstance(deps, str) or not isinstance(deps, Sequence):
            raise ValidationError(f"step {name!r}: depends_on must be a list of step names")
        for dep in deps:
            if dep not in steps:
                raise DependencyError(f"step {name!r} depends on unknown step {dep!r}", step=name)
    order: list[str] = []
    mark: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(name: str, path: list[str]) -> None:
        if mark.get(name) == 2:
            return
        if mark.get(name) == 1:
            cycle = path[path.index(name) :] + [name]
            raise DependencyError(f"cycle in flow: {' -> '.join(cycle)}", cycle=cycle)
        mark[name] = 1
        for dep in steps[name].get("depends_on", ()):
            visit(dep, [*path, name])
        mark[name] = 2
        order.append(name)

    for name in steps:
        visit(name, [])
    return order
