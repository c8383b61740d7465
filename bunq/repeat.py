"""Repeatable jobs: ``Queue.add(name, data, repeat={...})``, on the cron machinery.

A repeatable job is a :class:`~bunq.cron.Schedule` named ``repeat-<digest>``
(the digest of queue, job name and repeat spec, or ``repeat-<key>`` when the
spec names a ``key``), so every run is added exactly once across ``tick()``
calls, servers and processes (the schedule's compare-and-set), with the job id
``cron:<schedule>:<run_at>``. ``Queue.add`` returns the first run: due now, or
added at once as a job delayed until its time. Adding the same repeatable job
again changes nothing and returns its latest run.

``repeat`` (BullMQ's and bunqueue's names, snake_case or camelCase):

==============================  ==============================================
``every``                       interval in ms (runs at ``start + k*every``)
``pattern``                     a cron expression (5 fields, or 6 with seconds)
``limit``                       at most this many runs
``immediately``                 with ``every``: the first run now, not one interval on
``start_date`` / ``startDate``  no run before (epoch ms)
``end_date`` / ``endDate``      no run after (epoch ms)
``tz``                          the pattern's time zone (IANA name)
``key`` / ``jobId``             names the repeatable job (instead of its spec)
==============================  ==============================================

Runs do not wait for each other (BullMQ's repeat): a run whose previous job is
still running is added anyway.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .backends.base import Backend
from .cron import Schedule, Scheduler
from .errors import ValidationError
from .job import Job
from .validate import MAX_TIME, integer, text

PREFIX = "repeat-"
_ALIASES = {"startDate": "start_date", "endDate": "end_date", "jobId": "key"}
_STATE = frozenset({"count", "prevMillis", "offset"})  # bunqueue's bookkeeping: 0 or absent
_KEYS = frozenset({"every", "pattern", "limit", "immediately", "start_date", "end_date", "tz",
                   "key"})  # fmt: skip


def spec_of(repeat: object) -> dict[str, Any]:
    """Validate a ``repeat`` option; return it with bunq's names."""
    if not isinstance(repeat, Mapping):
        raise ValidationError("repeat must be a map {every | pattern, ...}", field="repeat")
    spec: dict[str, Any] = {_ALIASES.get(str(k), str(k)): v for k, v in repeat.items()
                            if v is not None and not (k in _STATE and v == 0)}  # fmt: skip
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise ValidationError(f"unknown repeat options {unknown}", field="repeat")
    if ("every" in spec) == ("pattern" in spec):
        raise ValidationError("repeat needs exactly one of every or pattern", field="repeat")
    if spec.get("immediately") and "every" not in spec:
        raise ValidationError("repeat immediately needs every", field="repeat.immediately")
    for name in ("start_date", "end_date"):
        if name in spec:
            integer(spec[name], f"repeat.{name}", 0, MAX_TIME)
    if "key" in spec:
        text(spec["key"], "repeat.key", 100)
    return spec


def schedule_name(queue: str, job_name: str, spec: Mapping[str, Any]) -> str:
    if "key" in spec:
        return PREFIX + hashlib.sha1(str(spec["key"]).encode()).hexdigest()[:24]
    blob = json.dumps([queue, job_name, dict(spec)], sort_keys=True, default=str)
    return PREFIX + hashlib.sha1(blob.encode()).hexdigest()[:24]


def add_repeatable(backend: Backend, queue: str, job_name: str, data: Any,
                   opts: Mapping[str, Any], repeat: object) -> Job:  # fmt: skip
    """Create (or find) the schedule and return its first run (see the module docstring).

    :raises ValidationError: a bad ``repeat``, job options a schedule cannot take
        (``job_id``, ``delay``), or data that is not JSON.
    :raises ConfigError: a bad pattern, time zone or interval.
    """
    spec = spec_of(repeat)
    for refused in ("job_id", "delay", "depends_on", "parent_id"):
        if opts.get(refused) not in (None, (), [], 0):
            raise ValidationError(f"a repeatable job cannot set {refused}", field=refused)
    scheduler = Scheduler(backend)
    now = backend.clock()
    start = spec.get("start_date")
    if spec.get("immediately"):
        start = max(start or 0, now)
    sched = Schedule(
        name=schedule_name(queue, job_name, spec),
        queue=queue,
        job_name=job_name,
        cron=spec.get("pattern"),
        every_ms=spec.get("every"),
        data=data,
        opts=dict(opts),
        tz=spec.get("tz", "UTC"),
        start_at=start,
        end_at=spec.get("end_date"),
        limit=spec.get("limit"),
        prevent_overlap=False,
    )
    # runs fall strictly after the time given: ``immediately`` makes ``now`` the first
    stored = scheduler.upsert(sched, now - 1 if spec.get("immediately") else now)
    if stored.last_job_id is not None:
        job = backend.get_job(stored.last_job_id)
        if job is not None:
            return job
    job = scheduler.fire_next(stored.name, now)
    if job is None:
        raise ValidationError(f"repeat {dict(spec)} has no run left", field="repeat")
    return job
