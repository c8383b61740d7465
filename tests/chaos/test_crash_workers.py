"""kill -9 of workers mid-batch, and of producers, under load on every shared backend.

A producer adds jobs while two worker processes run them; a worker holding a
batch of leases is SIGKILLed three times (a fresh one takes its place), then
the producer is SIGKILLed mid-add. The test process drains the queue and
counts (tests/chaos/ledger.py): every acknowledged add is present or settled,
no job has two accepted completions, and the jobs the dead workers held ran
again under a new fence. The memory engine has its own test
(test_crash_memory.py): one process owns its data file.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from chaos.conftest import BACKENDS
from chaos.ledger import Tally, Writer, ledger_dir, read, tally
from chaos.roles import QUEUE, drain, kill, lines, spawn, unfinished, wait_for

from bunq import connect

pytestmark = pytest.mark.slow

KILLS = 3


def settled_or_sent(t: Tally) -> bool:
    """SQS: every acknowledged add settled, or its completion sent by a worker since killed."""
    return t.acked <= set(t.settled) | set(t.settling)


@pytest.mark.parametrize("backend_url", BACKENDS, indirect=True)
def test_workers_killed_mid_batch_lose_nothing_and_settle_once(
    backend_url: str, tmp_path: Path
) -> None:
    d = ledger_dir(tmp_path)
    sqs = backend_url.startswith("sqs://")
    durable = ["--durable"] if backend_url.startswith("bunq://") else []
    # SQS counts visibility in whole seconds and accepts a delete with a lapsed handle: a
    # lease that lapses under CPU load (not a crash) would run and complete a job twice.
    lease_ms = 4_000 if sqs else 1_000
    # A kill must land mid-run to test recovery. With runs of 2 ms it mostly landed in a
    # lease's or a completion's transaction instead: on SQS the round trip to moto (about
    # 1 run in 3 interrupted), on SQLite the move of the producer's adds from the intake
    # (now and then not one of the five kills interrupted a run). 20 ms runs put it mid-run.
    sleep = "0.02"
    work = ("--sleep", sleep, "--lease-ms", str(lease_ms))
    producer = spawn("produce", backend_url, d / "producer.log", "--bulk", "10", *durable)
    workers = [spawn("work", backend_url, d / f"w{i}.log", *work) for i in range(2)]
    try:
        for k in range(KILLS):
            victim, log = workers[0], d / f"w{k}.log"
            seen = lines(log, "run")
            wait_for(lambda: lines(log, "run") >= seen + 40, 60, "the victim to run")  # noqa: B023
            kill(victim)  # mid-batch: it leases 20 at a time and runs each for `sleep`
            workers = [*workers[1:], spawn("work", backend_url, d / f"w{k + 2}.log", *work)]
        wait_for(lambda: lines(d / "producer.log", "ack") >= 1_000, 60, "1,000 acks")
        kill(producer)  # mid-add
    finally:
        for p in [producer, *workers]:
            if p.poll() is None:
                kill(p)
    backend = connect(backend_url)
    try:
        drainer = Writer(d / "drain.log")
        if sqs:  # no lookups by id: drained once SQS holds nothing (moto's counts are exact)
            # and every acknowledged add settled (or its completion went out before a kill)
            drain(backend, drainer, lambda: unfinished(backend) == 0 and settled_or_sent(read(d)),
                  lease_ms=lease_ms)  # fmt: skip
        else:
            drain(backend, drainer, lambda: unfinished(backend) == 0)
        drainer.close()
        t = tally(d, backend, by_id=not sqs)
    finally:
        backend.close()
    print(f"\nworkers SIGKILLed x{KILLS} on {backend_url.split(':')[0]}: {t.summary()}")
    t.check(settle_commits=True)
    if sqs:  # a completion sent by a worker killed before the answer: moto did delete it
        from backends.sqs import moto_server

        deleted = moto_server.deleted_handles(
            f"{parse_qs(urlparse(backend_url).query)['prefix'][0]}{QUEUE}"
        )
        assert [j for j in t.unconfirmed if not t.settling[j] & deleted] == []
    orphans = t.orphans(f"w{k}.log" for k in range(KILLS + 2))  # every worker died by SIGKILL
    assert orphans, "no kill interrupted a running job: the test did not test recovery"
    assert t.not_rerun(orphans) == []  # each ran again, and completed, under a later attempt
