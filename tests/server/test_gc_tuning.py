"""`bunq serve` tunes the cyclic GC once started: larger steps, cycles still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from bunq.server.cli import GC_THRESHOLDS, tune_gc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_start_up_objects_are_frozen_and_the_thresholds_set(restored_gc: None) -> None:
    made_before = Node()
    tune_gc()
    assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_freeze_count() > 0
    assert not any(o is made_before for o in gc.get_objects())  # frozen: in no generation


def test_a_cycle_made_after_tuning_is_still_collected_without_a_gc_call(
    restored_gc: None,
) -> None:
    tune_gc()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # only the cyclic collector can free it
    keep = [[] for _ in range(GC_THRESHOLDS[0] * 3)]  # new containers: a first-generation run
    assert gone() is None
    del keep
