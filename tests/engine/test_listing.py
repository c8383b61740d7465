"""The ready listing (engine/listing.py) behind the memory engine's cursor pages."""

from __future__ import annotations

import random

import pytest
from engine.test_model import EngineModel
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

from bunq.engine import Engine, listing
from bunq.engine.listing import Listing
from bunq.engine.record import Rec
from bunq.job import JobOptions, JobState
from bunq.queue import new_job


class PagedModel(EngineModel):
    """The engine model, with waiting pages read (which builds and then keeps listings):
    every step's ``_check`` compares the listings with the lanes."""

    @rule(queue=st.sampled_from(("a", "b", "c")), limit=st.integers(1, 3))
    def page(self, queue: str, limit: int) -> None:
        state = JobState.PAUSED if queue in self.paused else JobState.WAITING
        ids: list[str] = []
        after = None
        while True:
            page = self.engine.get_jobs_page(queue, state, limit, after)
            ids += [j.id for j in page.jobs]
            if page.next is None:
                break
            after = page.next
        assert ids == self.ready(queue)


TestPagedModel = PagedModel.TestCase
TestPagedModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


def _rec(i: int, priority: int, lifo: bool) -> Rec:
    opts = JobOptions(priority=priority, lifo=lifo)
    return Rec(
        f"j{i}", "q", "n", b"\xc0", opts, JobState.WAITING, seq=1000 + i, now=0, run_at=i % 7
    )


def test_sublists_split_and_empty_while_order_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "LOAD", 4)
    rnd = random.Random(7)
    recs = [_rec(i, rnd.randrange(3), rnd.random() < 0.2) for i in range(300)]
    index = Listing(recs[:50], 0.0)
    here = {r.id: r for r in recs[:50]}
    for rec in recs[50:]:
        index.add(rec)
        here[rec.id] = rec
        if rnd.random() < 0.4:
            gone = here.pop(rnd.choice(sorted(here)))
            index.remove(gone)
        index._check(set(here))
    ordered = sorted(here.values(), key=Rec.order_key)
    assert index.after(None, 1000) == ordered
    for cut in (0, 1, 17, len(ordered) - 1):
        assert index.after(ordered[cut].order_key(), 5) == ordered[cut + 1 : cut + 6]
    for rec in list(here.values()):
        index.remove(rec)
    index._check(set())
    assert index.after(None, 3) == [] and len(index) == 0


def test_listing_kept_until_idle_then_dropped() -> None:
    clock = [1_000_000]
    engine = Engine(clock=lambda: clock[0], shards=1)
    engine.add([new_job("q", "j", i, {}) for i in range(5)])
    engine.get_jobs_page("q", JobState.WAITING, 2)
    lanes = engine.shards[0].queues["q"].lanes
    assert lanes.listing is not None and len(lanes.listing) == 5
    engine.lease("q", 2, 3_600_000, "w")
    engine.add([new_job("q", "j", 9, {"priority": 3})])
    engine._check()
    assert len(lanes.listing) == 4
    clock[0] += int(listing.IDLE_S * 1000) + 1
    engine.sweep()
    assert lanes.listing is None
    assert len(engine.get_jobs_page("q", JobState.WAITING, 10).jobs) == 4
