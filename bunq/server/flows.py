"""``PUSHF``: bunqueue's atomic job graph, as its FlowProducer sends it.

``{jobs: [{id, queue, input: {name, data, dependsOn?, childrenIds?, parentId?,
...options}}]}``: every id is chosen by the client (``add``, ``addBulk``,
``addChain``, ``addBulkThen``, ``addTree`` all plan the graph first). The
server admits the whole graph in one backend ``add`` (every job or none: a bad
node leaves nothing behind) and answers each job's snapshot. Dependencies
inside the graph are admitted before their dependents, whatever the order sent.

Bounds are bunqueue's: at most 10,000 jobs, each job's data within the
backend's ``max_payload``, the whole graph within one frame (64 MiB).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import DependencyError, ValidationError
from ..job import NewJob
from .fields import as_str
from .wire import push_job, queue_of

MAX_FLOW_JOBS = 10_000
#: options bunqueue refuses inside an atomic flow (``flowValidation.ts``)
NOT_IN_FLOWS = ("repeat", "uniqueKey", "dedup", "debounceId", "debounceTtl")


def flow_jobs(msg: Mapping[str, Any]) -> list[NewJob]:
    """The graph's jobs, each after the graph's jobs it depends on.

    :raises ValidationError: a malformed node, a duplicate id, an option flows refuse.
    :raises DependencyError: a cycle inside the graph.
    """
    nodes = msg.get("jobs")
    if not isinstance(nodes, list) or not 0 < len(nodes) <= MAX_FLOW_JOBS:
        raise ValidationError(f"jobs must be a list of 1-{MAX_FLOW_JOBS} jobs", field="jobs")
    jobs: dict[str, NewJob] = {}
    for node in nodes:
        job = _node(node)
        if job.id in jobs:
            raise ValidationError(f"duplicate flow job id: {job.id}", field="jobs")
        jobs[job.id] = job
    return _dependencies_first(jobs)


def _node(node: object) -> NewJob:
    if not isinstance(node, Mapping) or not isinstance(node.get("input"), Mapping):
        raise ValidationError("each flow job is {id, queue, input}", field="jobs")
    job_id = as_str(node.get("id"), "id", 256)
    fields = dict(node["input"])
    for key in NOT_IN_FLOWS:
        if fields.get(key) is not None:
            raise ValidationError(f"{key} is not supported inside an atomic flow", field=key)
    fields["customId"] = job_id  # bunqueue plans every id, custom ones included
    return push_job(queue_of(node), fields, "customId")


def _dependencies_first(jobs: dict[str, NewJob]) -> list[NewJob]:
    order: list[NewJob] = []
    state: dict[str, int] = {}  # 1 = being visited, 2 = placed
    for root in jobs:
        if state.get(root) == 2:
            continue
        stack = [(root, iter(jobs[root].opts.depends_on))]
        state[root] = 1
        while stack:
            job_id, deps = stack[-1]
            dep = next(deps, None)
            if dep is None:
                stack.pop()
                state[job_id] = 2
                order.append(jobs[job_id])
            elif dep in jobs and state.get(dep) != 2:
                if state.get(dep) == 1:
                    raise DependencyError(f"flow contains a cycle at job {dep}", job_id=dep)
                state[dep] = 1
                stack.append((dep, iter(jobs[dep].opts.depends_on)))
    return order
