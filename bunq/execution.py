"""Running one job and settling its outcome: shared by Worker and tick().

``run_sync`` / ``run_async`` call the handler and turn what happened into an
:class:`Outcome`; :func:`settle` records it through the backend under the
lease's fence, routing failures through :mod:`bunq.policy`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .backends.base import Backend
from .codec import pack
from .errors import DelayedError, Retry, UnrecoverableError, ValidationError
from .job import FailureReason, Job, Lease, Settle
from .policy import FailDecision, decide_failure
from .stacks import frames, with_stack

Handler = Callable[[Job], Any | Awaitable[Any]]
log = logging.getLogger("bunq.jobs")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one handler call did."""

    ok: bool
    result: Any = None
    error: BaseException | None = None
    duration_ms: int = 0
    timed_out: bool = False


def is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - callable objects
    )


def run_sync(handler: Handler, job: Job) -> Outcome:
    """Call a handler (a coroutine result is run to completion on a fresh loop)."""
    start = time.perf_counter()
    try:
        result = handler(job)
        if inspect.isawaitable(result):
            result = asyncio.run(_timed(result, job.opts.timeout))
    except asyncio.TimeoutError as exc:
        return Outcome(False, error=exc, duration_ms=_ms(start), timed_out=True)
    except Exception as exc:
        return Outcome(False, error=exc, duration_ms=_ms(start))
    return Outcome(True, result, duration_ms=_ms(start))


async def run_async(handler: Handler, job: Job) -> Outcome:
    """Await a coroutine handler, enforcing ``opts.timeout`` by cancellation."""
    start = time.perf_counter()
    try:
        result = handler(job)
        if inspect.isawaitable(result):
            result = await _timed(result, job.opts.timeout)
    except asyncio.TimeoutError as exc:
        return Outcome(False, error=exc, duration_ms=_ms(start), timed_out=True)
    except Exception as exc:
        return Outcome(False, error=exc, duration_ms=_ms(start))
    return Outcome(True, result, duration_ms=_ms(start))


async def _timed(aw: Awaitable[Any], timeout_ms: int | None) -> Any:
    if timeout_ms is None:
        return await aw
    return await asyncio.wait_for(aw, timeout_ms / 1000)


def _ms(start: float) -> int:
    return int((time.perf_counter() - start) * 1000)


def decision_for(job: Job, outcome: Outcome, now: int) -> FailDecision:
    """Route a failed outcome through the retry/DLQ policy."""
    err = outcome.error
    if outcome.timed_out:
        return decide_failure(job, now, reason=FailureReason.TIMEOUT)
    if isinstance(err, UnrecoverableError):
        return decide_failure(job, now, unrecoverable=True)
    if isinstance(err, DelayedError):
        return decide_failure(job, now, delay_ms=err.delay_ms, give_back_attempt=True)
    if isinstance(err, Retry):
        return decide_failure(job, now, delay_ms=err.delay_ms)
    return decide_failure(job, now)


def describe(err: BaseException | None) -> str | None:
    if err is None:
        return None
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def failure_text(err: BaseException | None, stack_limit: int) -> str | None:
    """What a failed attempt records: the error, then its traceback (throw site first,
    at most ``stack_limit`` lines) in :mod:`bunq.stacks`' one representation."""
    text = describe(err)
    if err is None or text is None:
        return text
    return with_stack(text, frames(err, text), stack_limit)


@dataclass(frozen=True, slots=True)
class Settled:
    """How one settle went: the backend's answer and whether the job is now dead."""

    answer: Settle
    dead: bool = False
    failed: bool = False


def settle(backend: Backend, lease: Lease, outcome: Outcome) -> Settled:
    """Record one outcome under the lease's fence."""
    outcome = _storable(backend, outcome)
    if outcome.ok:
        return Settled(backend.complete(lease, outcome.result))
    now = backend.clock()
    decision = decision_for(lease.job, outcome, now)
    error = failure_text(outcome.error, lease.job.opts.stack_trace_limit)
    answer = backend.fail(lease, error, decision, outcome.duration_ms)
    log_failure(lease.job, outcome, decision, answer, now)
    return Settled(answer, dead=answer is Settle.OK and decision.is_dead, failed=True)


def log_failure(job: Job, outcome: Outcome, decision: FailDecision, answer: Settle,
                now: int) -> None:  # fmt: skip
    """Log a failed attempt: WARNING with what happens next, ERROR when dead-lettered.

    Every field a reader needs to find the job is in the record (``job_id``, ``queue``,
    ``job_name``, ``attempt``, ``error``), and the handler's traceback is attached.
    """
    err = outcome.error
    fields: dict[str, Any] = {
        "job_id": job.id, "queue": job.queue, "job_name": job.name, "attempt": job.attempts,
        "max_attempts": job.max_attempts, "error": describe(err),
        "duration_ms": outcome.duration_ms,
    }  # fmt: skip
    exc_info = (type(err), err, err.__traceback__) if err is not None else None
    wait = max(decision.run_at - now, 0)
    if decision.kind == "delay":  # DelayedError: a chosen reschedule, not a failure
        log.info("job %s delayed by its handler for %d ms", job.id, wait, extra=fields)
    elif answer is not Settle.OK:
        log.warning("job %s failed, but its lease was lost: not recorded (%s)", job.id,
                    answer.value, extra=fields, exc_info=exc_info)  # fmt: skip
    elif decision.is_dead:
        log.error("job %s failed and was dead-lettered (%s)", job.id, decision.reason.value,
                  extra={**fields, "reason": decision.reason.value}, exc_info=exc_info)  # fmt: skip
    else:
        log.warning("job %s failed (attempt %d of %d), will run again in %d ms", job.id,
                    job.attempts, job.max_attempts, wait, extra={**fields, "retry_in_ms": wait},
                    exc_info=exc_info)  # fmt: skip


def settle_many(backend: Backend, done: Sequence[tuple[Lease, Outcome]]) -> list[Settled]:
    """Settle a batch: completions share one transaction, failures go one by one.

    A result the backend refuses to store (not serialisable, too large) turns
    that attempt into an unrecoverable failure: retrying would refuse it again.
    """
    done = [(lease, _storable(backend, o)) for lease, o in done]
    oks = [(lease, o.result) for lease, o in done if o.ok]
    answers = iter(backend.complete_many(oks)) if oks else iter(())
    out = []
    for lease, o in done:
        out.append(Settled(next(answers)) if o.ok else settle(backend, lease, o))
    return out


def _storable(backend: Backend, outcome: Outcome) -> Outcome:
    if not outcome.ok or outcome.result is None:
        return outcome
    limit = getattr(backend, "max_payload", None)
    try:
        pack(outcome.result, "result", limit)
    except ValidationError as exc:
        return Outcome(False, error=UnrecoverableError(str(exc)), duration_ms=outcome.duration_ms)
    return outcome
