from __future__ import annotations

from bunq.job import Backoff, FailureReason, Job, JobOptions, JobState
from bunq.policy import backoff_delay, decide_failure, decide_stall


def job(attempts: int, max_attempts: int = 3, backoff: Backoff | None = None) -> Job:
    opts = JobOptions(attempts=max_attempts, backoff=backoff or Backoff("exponential", 100))
    return Job("id", "q", "n", None, JobState.ACTIVE, opts, attempts=attempts)


def test_exponential_backoff_doubles_up_to_the_cap() -> None:
    b = Backoff("exponential", 100, cap=500)
    assert [backoff_delay(b, a) for a in range(1, 6)] == [100, 200, 400, 500, 500]
    assert backoff_delay(Backoff("fixed", 70), 9) == 70
    assert backoff_delay(Backoff("exponential", 1), 10_000) > 0  # no overflow


def test_jitter_stays_within_its_band() -> None:
    b = Backoff("fixed", 1000, jitter=0.25)
    assert backoff_delay(b, 1, rand=lambda: 0.0) == 1000
    assert backoff_delay(b, 1, rand=lambda: 1.0) == 750


def test_decisions() -> None:
    assert decide_failure(job(1), 1000).kind == "retry"
    assert decide_failure(job(1), 1000).run_at == 1100
    assert decide_failure(job(2), 1000).run_at == 1200
    dead = decide_failure(job(3), 1000)
    assert dead.kind == "dlq" and dead.reason is FailureReason.MAX_ATTEMPTS_EXCEEDED
    assert decide_failure(job(3), 0, reason=FailureReason.TIMEOUT).reason is FailureReason.TIMEOUT
    assert decide_failure(job(1), 0, unrecoverable=True).reason is FailureReason.EXPLICIT_FAIL
    assert decide_failure(job(1), 0, delay_ms=5).run_at == 5
    back = decide_failure(job(3), 10, delay_ms=5, give_back_attempt=True)
    assert back.kind == "delay" and back.run_at == 15


def test_stall_decision() -> None:
    assert decide_stall(1, 3, 1, 3) is False
    assert decide_stall(3, 3, 1, 3) is True  # attempts spent
    assert decide_stall(1, 3, 4, 3) is True  # stall budget spent
