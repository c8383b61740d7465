"""The execution core every driver shares: run a handler, settle its outcome.

- :mod:`.run`: :func:`run_sync` / :func:`run_async` turn one handler call into
  an :class:`Outcome`; :class:`Executor` is where calls run (inline, threads,
  one event loop); :class:`OnLoop` runs a Worker's loop on its handler's event
  loop (memory engine, coroutine handler); :class:`Crew` runs it on a sync
  handler's threads (memory engine).
- :mod:`.context`: :class:`JobContext` (progress, log, extend, cancelled) and the
  cancel requests drivers poll.
- :mod:`.settle`: :func:`settle_batch` records outcomes under their leases'
  fences (policy, storability, retry on unavailable); :func:`give_back`
  returns unstarted leases.
- :mod:`.observe`: the :class:`Observer` a driver passes to the settler (metrics,
  webhooks) to see what was recorded.

Used by :class:`bunq.Worker`, :func:`bunq.tick`, the SQS event-source driver
(:mod:`bunq.sqs_events`) and the server (give-back). See docs/internals/execution.md.
"""

from __future__ import annotations

from .context import (
    CANCEL_POLL_S,
    JobContext,
    forget_cancel,
    poll_cancels,
    prune_cancels,
    request_cancel,
    takes_context,
)
from .crew import Crew
from .observe import Observer, Observers
from .onloop import OnLoop
from .run import Executor, Handler, Outcome, is_async, run_async, run_sync
from .settle import (
    SETTLE_RETRIES,
    SUCCEEDED,
    Settled,
    decision_for,
    describe,
    give_back,
    log_failure,
    settle_batch,
    settle_failure,
)

__all__ = [
    "CANCEL_POLL_S",
    "Crew",
    "SETTLE_RETRIES",
    "SUCCEEDED",
    "Executor",
    "Handler",
    "JobContext",
    "Observer",
    "Observers",
    "OnLoop",
    "Outcome",
    "Settled",
    "decision_for",
    "describe",
    "forget_cancel",
    "give_back",
    "is_async",
    "log_failure",
    "poll_cancels",
    "prune_cancels",
    "request_cancel",
    "run_async",
    "run_sync",
    "settle_batch",
    "settle_failure",
    "takes_context",
]
