"""A queue setting stored out of bounds (by an older bunq) never stops a sweep.

Settings are checked when built now (``bunq.queueconfig``), so no bunq can
store ``max_entries=-1`` any more; a row written before that reads as the
defaults. Before: every PostgreSQL sweep raised (negative OFFSET), so expired
leases in every other queue were never recovered.
"""

from __future__ import annotations

from typing import Any

import pytest

from bunq import Queue
from bunq.codec import pack


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_bad_stored_dlq_row_does_not_stop_the_sweep(make_backend: Any, clock: Any,
                                                       kind: str) -> None:  # fmt: skip
    b = make_backend(kind, clock=clock)
    bad = {"auto_retry": False, "auto_retry_interval": 60_000, "max_auto_retries": 3,
           "max_age": None, "max_entries": -1}  # fmt: skip
    with b._begin() as tx:
        tx.q("queue_set_dlq", queue="bad", dlq=pack(bad))
    other = Queue("other", b)
    job = other.add("j", 1)
    assert [lease.id for lease in b.lease("other", 1, 1_000)] == [job.id]
    clock.advance(5_000)
    assert b.sweep().requeued == 1  # the other queue's crashed lease is recovered
    assert Queue("bad", b).dlq.config().max_entries == 10_000  # read as the defaults
