"""``WaitJob {id, timeout}``: hold the reply until the job finishes (``job.waitUntilFinished``).

Replies (bunqueue's shapes, plus bunq's ``failed``):

- completed: ``{ok: true, completed: true, result}``;
- dead-lettered (bunqueue would wait out the timeout): ``{ok: true,
  completed: false, failed: true, failedReason}``;
- timed out (also on shutdown): ``{ok: true, completed: false}``;
- unknown id (or the job was removed while waited for): ``{ok: false,
  error: "Job not found: <id>"}``.

``timeout`` is in ms, default 30 000, at most :data:`MAX_WAIT_MS` (bunqueue's
bound; more is a validation error, as in bunqueue). A job settled through
this server answers at once (see :mod:`bunq.server.jobwait`); the job is
re-read every :data:`RECHECK_S` seconds so one settled elsewhere (another
broker on the same database, a sweep) still answers. The wait runs in its
own task: other requests on the connection keep being served.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ...errors import JobNotFound
from ...job import Job, JobState
from ..context import ServerContext, Session
from ..fields import as_str, opt_int
from ..jobwait import Outcome, completed, failed
from . import command

MAX_WAIT_MS = 600_000
DEFAULT_WAIT_MS = 30_000
RECHECK_S = 1.0
TIMED_OUT: Outcome = {"completed": False}


def outcome(job: Job) -> Outcome | None:
    """The reply for a finished job; None while it may still run."""
    if job.state is JobState.COMPLETED:
        return completed(job.result)
    if job.state is JobState.FAILED:
        return failed(job.error)
    return None


@command("WaitJob")
async def wait_job(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, timeout?}`` -> the job's outcome, or ``{completed: false}`` after ``timeout`` ms."""
    job_id = as_str(msg.get("id"), "id", 1024)
    timeout_ms = opt_int(msg, "timeout", DEFAULT_WAIT_MS, 0, MAX_WAIT_MS)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    waiters = ctx.job_waiters
    while True:
        # watch before reading, so a settlement between the two is not missed
        fut = waiters.watch(job_id, id(s))
        try:
            job = await ctx.run(ctx.backend.get_job, job_id)
            if job is None:
                raise JobNotFound(f"Job not found: {job_id}", job_id=job_id)
            done = outcome(job)
            if done is not None:
                return dict(done)
            left = deadline - loop.time()
            if left <= 0 or ctx.stopping or s.closed:
                return dict(TIMED_OUT)
            await asyncio.wait((fut,), timeout=min(left, RECHECK_S))
            got = fut.result() if fut.done() and not fut.cancelled() else None
        finally:
            waiters.unwatch(fut)
        if got is not None:
            return dict(got)
        if s.closed or ctx.stopping:
            return dict(TIMED_OUT)
