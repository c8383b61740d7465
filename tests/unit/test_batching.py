"""The one leader/follower coalescer (bunq.batching), used by SQL group commit and
by the remote backend's adds: callers share flushes, every caller gets its own
answer, one caller's refused data never fails another, a batch stays within its size.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from bunq.batching import Batcher, Slot
from bunq.errors import BackendUnavailable, ValidationError


def _gated(flushes: list[list[Any]], gate: threading.Event, refuse: Any = None) -> Any:
    def flush(batch: list[Slot[Any]]) -> None:
        flushes.append([s.work for s in batch])
        gate.wait(5)  # the first flush holds the lead while the others queue up
        if refuse in [s.work for s in batch]:  # one caller's data fails the whole flush
            raise ValidationError("refused", field="x")
        for s in batch:
            s.result = s.work * 10

    return flush


def _run_concurrently(b: Batcher[Any], works: list[Any], flushes: list[Any],
                      gate: threading.Event) -> list[Any]:  # fmt: skip
    out: list[Any] = [None] * len(works)

    def call(i: int) -> None:
        try:
            out[i] = b.run(works[i])
        except Exception as exc:
            out[i] = exc

    first = threading.Thread(target=call, args=(0,))
    first.start()
    while not flushes:  # the first caller leads and is flushing alone
        threading.Event().wait(0.001)
    rest = [threading.Thread(target=call, args=(i,)) for i in range(1, len(works))]
    for t in rest:
        t.start()
    while len(b._pending) < len(rest):  # every other caller queued behind the leader
        threading.Event().wait(0.001)
    gate.set()
    for t in [first, *rest]:
        t.join(5)
    return out


def test_a_lone_caller_flushes_alone_and_gets_its_result() -> None:
    flushes: list[list[Any]] = []
    gate = threading.Event()
    gate.set()
    b: Batcher[int] = Batcher(_gated(flushes, gate))
    assert b.run(4) == 40
    assert flushes == [[4]]


def test_callers_that_queue_behind_the_leader_share_one_flush() -> None:
    flushes: list[list[Any]] = []
    gate = threading.Event()
    b: Batcher[int] = Batcher(_gated(flushes, gate))
    out = _run_concurrently(b, [1, 2, 3, 4], flushes, gate)
    assert out == [10, 20, 30, 40]
    assert flushes[0] == [1]
    assert sorted(flushes[1]) == [2, 3, 4] and len(flushes) == 2


def test_a_batch_holds_at_most_most_units_but_always_one_call() -> None:
    flushes: list[list[Any]] = []
    gate = threading.Event()
    b: Batcher[list[int]] = Batcher(_gated(flushes, gate), most=3, size=len)
    gate.set()
    b._pending = [Slot([1, 1]), Slot([2]), Slot([3, 3]), Slot([4, 4, 4, 4])]
    assert [len(b._take()) for _ in range(3)] == [2, 1, 1]  # 2+1, then 2, then 4 (> most)


def test_one_callers_refused_data_is_flushed_alone_and_fails_only_that_caller() -> None:
    flushes: list[list[Any]] = []
    gate = threading.Event()
    b: Batcher[int] = Batcher(_gated(flushes, gate, refuse=3), alone_on=(ValidationError,))
    out = _run_concurrently(b, [1, 2, 3, 4], flushes, gate)
    assert out[:2] == [10, 20] and out[3] == 40
    assert isinstance(out[2], ValidationError)
    assert [3] in flushes  # the shared flush failed, then each caller on its own


def test_a_failed_flush_reaches_every_caller_in_it() -> None:
    def flush(batch: list[Slot[int]]) -> None:
        raise BackendUnavailable("down")

    b: Batcher[int] = Batcher(flush, alone_on=(ValidationError,))
    with pytest.raises(BackendUnavailable):
        b.run(1)
    with pytest.raises(BackendUnavailable):  # the leader stepped down: the next call leads
        b.run(2)
