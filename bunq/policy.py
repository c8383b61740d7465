"""Retry, backoff and dead-letter routing: pure functions of a job and `now`.

One policy for every driver (Worker, tick) and every backend (sweep of
expired leases). Nothing here reads a clock or touches storage.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .errors import ValidationError
from .job import Backoff, FailureReason, Job
from .validate import MAX_DURATION_MS, MAX_TIME

DEFAULT_MAX_STALLS = 3


@dataclass(frozen=True, slots=True)
class FailDecision:
    """What to do with a failed attempt.

    ``retry``: back to waiting/delayed at ``run_at`` (the attempt is spent);
    ``delay``: back at ``run_at`` and the attempt is given back (DelayedError);
    ``dlq``: into the dead-letter queue with ``reason``.
    """

    kind: Literal["retry", "delay", "dlq"]
    run_at: int
    reason: FailureReason

    def __post_init__(self) -> None:
        run_at = self.run_at
        if type(run_at) is not int or not 0 <= run_at <= MAX_TIME:
            raise ValidationError(f"run_at must be an integer in [0, {MAX_TIME}]",
                                  field="run_at")  # fmt: skip

    @property
    def is_dead(self) -> bool:
        return self.kind == "dlq"


def backoff_delay(backoff: Backoff, attempt: int, rand: Callable[[], float] = random.random) -> int:
    """Return the wait in ms before attempt ``attempt + 1``.

    Fixed: ``delay``. Exponential: ``min(delay * 2**(attempt-1), cap)``.
    With ``jitter`` j the result is scaled by a factor in ``[1 - j, 1]``.
    Never more than ``MAX_DURATION_MS`` (100 years), so the retry time fits every store.
    """
    if backoff.type == "fixed":
        base = backoff.delay
    else:
        base = backoff.delay * (1 << min(max(attempt - 1, 0), 40))
    base = min(base, MAX_DURATION_MS if backoff.cap is None else backoff.cap)
    if backoff.jitter:
        base = int(base * (1.0 - backoff.jitter * rand()))
    return base


def decide_failure(
    job: Job,
    now: int,
    *,
    reason: FailureReason = FailureReason.EXPLICIT_FAIL,
    unrecoverable: bool = False,
    delay_ms: int | None = None,
    give_back_attempt: bool = False,
) -> FailDecision:
    """Route a failed attempt of ``job`` (whose ``attempts`` counts this one).

    :param reason: why the attempt ended (explicit_fail for a raised error,
        timeout when the handler ran past ``opts.timeout``).
    :param unrecoverable: the handler raised UnrecoverableError: straight to the DLQ.
    :param delay_ms: a handler-chosen wait instead of the backoff.
    :param give_back_attempt: DelayedError: reschedule without spending an attempt.
    """
    if give_back_attempt:
        return FailDecision("delay", now + _bounded(delay_ms or 0), reason)
    if unrecoverable:
        return FailDecision("dlq", now, FailureReason.EXPLICIT_FAIL)
    if job.attempts >= job.opts.attempts:
        final = reason if reason is FailureReason.TIMEOUT else FailureReason.MAX_ATTEMPTS_EXCEEDED
        return FailDecision("dlq", now, final)
    wait = delay_ms if delay_ms is not None else backoff_delay(job.opts.backoff, job.attempts)
    return FailDecision("retry", now + _bounded(wait), reason)


def _bounded(wait_ms: object) -> int:
    """A handler-chosen or computed wait in ms, within [0, MAX_DURATION_MS] (not a number: 0)."""
    if isinstance(wait_ms, bool) or not isinstance(wait_ms, (int, float)) or wait_ms != wait_ms:
        return 0
    return int(min(max(wait_ms, 0), MAX_DURATION_MS))


def decide_stall(attempts: int, max_attempts: int, stalls: int, max_stalls: int) -> bool:
    """Return True when an expired lease sends the job to the DLQ (reason stalled).

    ``stalls`` counts this stall too. The attempt that stalled is spent: a
    job whose attempts are used up, or that stalled more than ``max_stalls``
    times, is dead; otherwise it goes back to waiting at once.
    """
    return attempts >= max_attempts or stalls > max_stalls
