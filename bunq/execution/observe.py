"""What the settler tells observers (metrics, webhooks): each settled batch, each give-back.

An :class:`Observer` is passed by the driver to :func:`~bunq.execution.settle_batch`,
:func:`~bunq.execution.settle_failure` and :func:`~bunq.execution.give_back`; the
settler calls it once per call, after the backend answered. An observer that raises
is logged and otherwise ignored: observing never changes what was settled.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from ..job import Lease, Settle
from .run import Outcome

log = logging.getLogger("bunq.jobs")


class Settled(Protocol):
    """How one item was settled (:class:`bunq.execution.Settled`)."""

    @property
    def kind(self) -> str:
        """succeeded, failed, stale or unsettled."""
        ...

    @property
    def dead(self) -> bool:
        """It was dead-lettered."""
        ...


class Observer(Protocol):
    """Sees what the settler recorded (called on the driver's thread)."""

    def settled(self, done: Sequence[tuple[Lease, Outcome]], results: Sequence[Settled]) -> None:
        """``done[i]`` was settled as ``results[i]``."""
        ...

    def given_back(self, leases: Sequence[Lease], answers: Sequence[Settle]) -> None:
        """``leases`` were returned unstarted (``answers[i]``: the backend's)."""
        ...


class Observers:
    """Several observers as one (in order)."""

    def __init__(self, *observers: Observer | None) -> None:
        self.observers = tuple(o for o in observers if o is not None)

    def settled(self, done: Sequence[tuple[Lease, Outcome]], results: Sequence[Settled]) -> None:
        for o in self.observers:
            o.settled(done, results)

    def given_back(self, leases: Sequence[Lease], answers: Sequence[Settle]) -> None:
        for o in self.observers:
            o.given_back(leases, answers)


def notify_settled(observer: Observer | None, done: Sequence[tuple[Lease, Outcome]],
                   results: Sequence[Settled]) -> None:  # fmt: skip
    if observer is not None and done:
        try:
            observer.settled(done, results)
        except Exception:  # an observer's bug must not fail a settle that succeeded
            log.exception("settle observer failed")


def notify_given_back(observer: Observer | None, leases: Sequence[Lease],
                      answers: Sequence[Settle]) -> None:  # fmt: skip
    if observer is not None and leases:
        try:
            observer.given_back(leases, answers)
        except Exception:
            log.exception("settle observer failed")
