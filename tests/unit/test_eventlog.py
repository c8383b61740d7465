"""The write-behind of events (EventWriter) and the listener gate (ListenCache)."""

from __future__ import annotations

import threading
from typing import Any

from bunq.backends.eventlog import LISTEN_NS, register_reader
from bunq.backends.eventwriter import EventWriter, ListenCache
from bunq.errors import BackendUnavailable
from bunq.jobevents import EventKind, JobEvent, pack_events, unpack_events


def ev(i: int, queue: str = "q") -> JobEvent:
    return JobEvent(EventKind.WAITING, queue, str(i), i)


def test_writer_batches_and_flushes_before_close() -> None:
    batches: list[list[str]] = []
    w = EventWriter(lambda b: batches.append([e.job_id for e in b]), "t", gather_ms=20)
    w.publish_events([ev(1)])
    w.publish_events([ev(2), ev(3)])
    assert w.flush(5)
    w.close()
    assert [i for b in batches for i in b] == ["1", "2", "3"] and len(batches) <= 2
    w.publish_events([ev(4)])  # after close: dropped, no thread
    assert [i for b in batches for i in b] == ["1", "2", "3"]


def test_writer_retries_an_unavailable_store_in_order() -> None:
    got: list[str] = []
    fails = [2]

    def write(batch: list[JobEvent]) -> None:
        if fails[0]:
            fails[0] -= 1
            raise BackendUnavailable("down")
        got.extend(e.job_id for e in batch)

    w = EventWriter(write, "t", gather_ms=1)
    w.publish_events([ev(1)])
    w.publish_events([ev(2)])
    assert w.flush(5)
    w.close()
    assert got == ["1", "2"]


def test_writer_is_bounded_and_gated() -> None:
    release = threading.Event()
    got: list[str] = []
    w = EventWriter(lambda b: (release.wait(5), got.extend(e.job_id for e in b)), "t",
                    listened=lambda q: q == "heard", gather_ms=1, bound=3)  # fmt: skip
    w.publish_events([ev(0, "heard")])
    w.publish_events([ev(i, "heard") for i in range(1, 6)] + [ev(9, "nobody")])
    release.set()
    assert w.flush(5)
    w.close()
    assert got[-3:] == ["3", "4", "5"] and "9" not in got and w.dropped >= 2


def test_listen_cache_reads_the_registration(make_backend: Any) -> None:
    backend = make_backend("sqlite")
    seen = ListenCache(backend)
    assert seen("q") is False
    register_reader(backend, "q")
    assert seen("q") is False  # trusted for a second...
    seen.forget("q")
    assert seen("q") is True  # ...unless told
    assert backend.kv_get(LISTEN_NS, "q") is not None


def test_events_of_a_batch_share_one_record_and_skip_what_cannot_be_encoded() -> None:
    evs = [JobEvent(EventKind.COMPLETED, "q", "a", 1, {"result": {1, 2}}),  # a set: no
           JobEvent(EventKind.COMPLETED, "q", "b", 2, {"result": [1, 2]})]  # fmt: skip
    back = unpack_events("q", pack_events(evs))
    assert [(e.job_id, e.data) for e in back] == [("a", {}), ("b", {"result": [1, 2]})]
    assert unpack_events("q", b"\xc1") == []
