"""The Job an add returns and the NewJob it admits, and the engine's Job and Lease of a
record, built in C (:class:`bunq._core.SlotBuilder`).

All are frozen slotted dataclasses, built once per job on every add path (the memory
engine, the SQL backends, ``Queue.add`` / ``add_bulk`` and the server's PUSH / PUSHB)
and on every lease and read of the memory engine.
Their ``__init__`` sets each field through ``object.__setattr__``; a builder here fills
the slots directly, one C call per object, and leaves the Job's queue handle unset, as
the constructor does (``Queue`` attaches it). The objects are the same frozen
dataclasses: ``tests/unit/test_job.py`` compares each builder with the constructor,
field by field, and checks that the result is still frozen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._core import SlotBuilder
from ..job import Job, JobId, JobOptions, JobState, Lease, NewJob

#: ``admitted_job(id, queue, name, data, state, opts, created_at, run_at)``:
#: ``Job(id, queue, name, data, state, opts, created_at=..., run_at=...)``, a job just
#: admitted (no attempt, start, finish, progress, result, error or history yet)
admitted_job: Callable[[JobId, str, str, Any, JobState, JobOptions, int, int], Job] = SlotBuilder(
    Job,
    ("id", "queue", "name", "data", "state", "opts", "created_at", "run_at"),
    {
        "attempts": 0,
        "started_at": None,
        "finished_at": None,
        "progress": 0,
        "result": None,
        "error": None,
        "reason": None,
        "history": (),
        "stalls": 0,
    },
)

#: ``build_new_job(queue, name, data, opts, id)``: ``NewJob(queue, name, data, opts, id)``
#: (the values are checked by the backend's add, as always)
build_new_job: Callable[[str, str, Any, JobOptions, JobId], NewJob] = SlotBuilder(
    NewJob, ("queue", "name", "data", "opts", "id")
)

#: ``job_with(<every field of Job, in its order>)``: ``Job(...)`` with each field given
#: (the engine's Job of a record, :func:`.record.job_of`)
job_with: Callable[..., Job] = SlotBuilder(Job, Job.__slots__)

#: ``lease_with(job, token, attempt, expires_at, owner)``: ``Lease(...)``
lease_with: Callable[[Job, str, int, int, str], Lease] = SlotBuilder(Lease, Lease.__slots__)
