"""What one handler call did (:class:`Outcome`), and how a call's return or raise
becomes one: shared by :func:`~.run.run_sync`, :func:`~.run.run_async` and the
executor's slot tasks (:mod:`.slots`, which await their calls inline)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import JobCancelled
from ..job import Job
from .context import JobContext

Clock = Callable[[], int]


class HandlerCancelled(Exception):
    """A coroutine handler raised :class:`asyncio.CancelledError` while nobody had
    cancelled its job: its attempt fails (and is retried by the job's policy)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one handler call did.

    ``duration_ms``: how long the handler ran (a monotonic measure, recorded with a
    failure); ``took``: the same call timed with the driver's clock, when it gave one
    (tick's deadline estimates follow that clock, a fake one in tests), else 0.
    """

    ok: bool
    result: Any = None
    error: BaseException | None = None
    duration_ms: int = 0
    timed_out: bool = False
    took: int = 0
    cancelled: bool = False


# The outcome of every call that returned None in under a millisecond, with no clock to
# time it: one shared (frozen) object instead of one per job, which is most of what a
# fast handler's outcome costs (the dataclass's frozen __init__).
OK_NONE = Outcome(True)
perf = time.perf_counter


def ok_outcome(result: Any, ms: int, took: int) -> Outcome:
    if result is None and ms == 0 and took == 0:
        return OK_NONE
    return Outcome(True, result, None, ms, False, took)


def returned(result: Any, job: Job, ctx: JobContext | None, start: float,
             clock: Clock | None, t0: int) -> Outcome:  # fmt: skip
    """A coroutine call returned ``result``: cancelled if its job was meanwhile."""
    if ctx is not None and ctx.cancel_requested:
        return cancelled_outcome(job, start, clock, t0)
    ms = int((perf() - start) * 1000)
    if result is None and ms == 0 and clock is None:  # ok_outcome's common case, no call
        return OK_NONE
    return ok_outcome(result, ms, took_since(clock, t0))


def raised(exc: BaseException, job: Job, ctx: JobContext | None, start: float,
           clock: Clock | None, t0: int) -> Outcome:  # fmt: skip
    """A coroutine call raised ``exc`` (an Exception or CancelledError): timed out,
    cancelled if its job was, else failed."""
    if isinstance(exc, asyncio.TimeoutError):
        return Outcome(False, None, exc, ms_since(start), True, took_since(clock, t0))
    if ctx is not None and ctx.cancel_requested:
        return cancelled_outcome(job, start, clock, t0)
    if isinstance(exc, asyncio.CancelledError):
        # Nobody cancelled the job: the handler raised it (or let an inner task's escape).
        # Its attempt fails like any error; re-raised, it would end the executor's task
        # with no outcome, and the driver would hold the job and its slot until closed.
        exc = HandlerCancelled(f"the handler raised CancelledError{f': {exc}' if str(exc) else ''}")
    return Outcome(False, None, exc, ms_since(start), False, took_since(clock, t0))


def cancelled_outcome(job: Job, start: float, clock: Clock | None, t0: int) -> Outcome:
    err = JobCancelled(f"job {job.id} was cancelled", job_id=job.id)
    return Outcome(False, None, err, ms_since(start), False, took_since(clock, t0), cancelled=True)


def took_since(clock: Clock | None, t0: int) -> int:
    return clock() - t0 if clock is not None else 0


def ms_since(start: float) -> int:
    return int((perf() - start) * 1000)
