"""kill -9 of producers mid-bulk on SQLite, whose bulks of plain jobs go in as packs.

Two producers add bulks of 300 (each one pack row, written in one transaction) while a
worker leases, which moves the packs into ``jobs`` as it goes. The worker is SIGKILLed
mid-batch, then each producer mid-add while packs pile up; the test process moves
them as it drains and counts (tests/chaos/ledger.py): every acknowledged add is
present, none settled twice.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import apsw
import pytest
from chaos.ledger import ledger_dir
from chaos.roles import finish, kill, lines, spawn, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_producers_killed_mid_bulk_lose_no_packed_job(backend_url: str, tmp_path: Path) -> None:
    d = ledger_dir(tmp_path)
    producers = [spawn("produce", backend_url, d / f"p{i}.log", "--bulk", "300")
                 for i in range(2)]  # fmt: skip
    worker = spawn("work", backend_url, d / "w.log", "--lease-ms", "5000")
    try:
        wait_for(lambda: lines(d / "w.log", "run") >= 300, 60, "the worker to run")
        kill(worker)  # mid-batch; from here on the packs pile up, nobody moving them
        for i, p in enumerate(producers):
            log = d / f"p{i}.log"
            seen = lines(log, "ack")
            wait_for(lambda: lines(log, "ack") >= seen + 3_000, 60, "3,000 acks")  # noqa: B023
            kill(p)  # mid-add: it adds one bulk after another
    finally:
        for p in [*producers, worker]:
            if p.poll() is None:
                kill(p)
    path = backend_url.removeprefix("sqlite:///")
    with contextlib.closing(apsw.Connection(path)) as raw:  # before bunq opens (and moves)
        packed = raw.execute("SELECT COUNT(*) FROM intake_packs").fetchall()[0][0]
    t = finish(d, backend_url)
    print(f"\nproducers of packs SIGKILLed, {packed} packs pending: {t.summary()}")
    assert packed >= 10, "the producers wrote no packs: the test tested rows"
    t.check(settle_commits=True)
