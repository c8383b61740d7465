"""The chaos suite's processes: producers, workers and an engine owner, over any backend URL.

Run as a script (the child processes the tests SIGKILL)::

    python roles.py produce URL LEDGER [--durable] [--bulk N] [--count N]
    python roles.py work URL LEDGER [--lease-ms N] [--sleep S] [--threads N]
    python roles.py own URL LEDGER [--durable] [--producers N] [--threads N] [--sleep S]

``produce`` adds jobs to queue ``chaos`` and records each acknowledged id;
a refused add (the backend is down or restarting) is retried after a pause,
so it only ever records what the backend acknowledged. ``work`` runs Workers
whose completions are recorded through :class:`ledger.Recording`. ``own``
(memory engine: one process owns the data file) runs both in one process.
Each stops by itself after ``MAX_SECONDS`` (default 60) if nobody kills it.
The test process uses :func:`drain` the same way to finish what is left.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, when run as a script

from chaos.ledger import Recording, Tally, Writer, child_env, tally

from bunq import JobState, Queue, Worker, connect
from bunq.errors import BunqError

QUEUE = "chaos"
ATTEMPTS = 25
MAX_SECONDS = float(os.environ.get("MAX_SECONDS", "60"))


def produce(backend: Any, ledger: Writer, *, durable: bool = False, bulk: int = 1,
            count: int = 0) -> int:  # fmt: skip
    """Add jobs until ``count`` are acknowledged (0: no limit) or MAX_SECONDS pass.

    Jobs get ``ATTEMPTS`` attempts: on SQS every lapsed lease spends one, even
    for a job leased in a batch but never started, and a job past its
    attempts is dead-lettered instead of run.
    """
    q = Queue(QUEUE, backend)
    opts: dict[str, Any] = {"attempts": ATTEMPTS, **({"durable": True} if durable else {})}
    acked, i = 0, 0
    deadline = time.monotonic() + MAX_SECONDS
    while (not count or acked < count) and time.monotonic() < deadline:
        try:
            if bulk == 1:
                jobs = [q.add("job", {"i": i}, **opts)]
            else:
                jobs = q.add_bulk([("job", {"i": i + k}, opts) for k in range(bulk)])
        except BunqError:  # refused: nothing acknowledged; wait for the backend to come back
            time.sleep(0.05)
            continue
        ledger.acked(jobs)
        acked += len(jobs)
        i += bulk
    return acked


def workers(backend: Any, ledger: Writer, *, threads: int = 2, lease_ms: int = 2_000,
            sleep_s: float = 0.0, batch: int = 20) -> list[Worker]:  # fmt: skip
    """Start ``threads`` Workers on ``QUEUE`` that record runs and accepted completions."""
    recording = Recording(backend, ledger)

    def handler(job: Any) -> None:
        ledger.ran(job)
        if sleep_s:
            time.sleep(sleep_s)

    return [Worker(QUEUE, handler, recording, lease_ms=lease_ms, batch=batch,  # type: ignore[arg-type]
                   sweep_interval_ms=300, idle_wait_ms=200).start()
            for _ in range(threads)]  # fmt: skip


def unfinished(backend: Any) -> int:
    counts = backend.counts(QUEUE)
    return sum(counts[s] for s in (JobState.WAITING, JobState.DELAYED, JobState.ACTIVE))


def drain(backend: Any, ledger: Writer, done: Callable[[], bool] | None = None,
          timeout: float = 60.0, lease_ms: int = 1_000) -> None:  # fmt: skip
    """Work the queue in this process until ``done()`` (default: nothing unfinished)."""
    check = done or (lambda: unfinished(backend) == 0)
    ws = workers(backend, ledger, threads=2, lease_ms=lease_ms)
    deadline = time.monotonic() + timeout
    try:
        while not check():
            assert time.monotonic() < deadline, f"not drained in {timeout} s"
            time.sleep(0.1)
    finally:
        for w in ws:
            w.close()


def finish(directory: Path, url: str) -> Tally:
    """After the chaos: reopen ``url``, run every unfinished job to its end, and count."""
    backend = connect(url)
    try:
        drainer = Writer(directory / "drain.log")
        drain(backend, drainer, lambda: unfinished(backend) == 0)
        drainer.close()
        return tally(directory, backend)
    finally:
        backend.close()


def spawn(role: str, url: str, ledger: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    """Start a role; its stderr (the clients' retry warnings) goes to ``<ledger>.err``."""
    with open(ledger.with_suffix(".err"), "a") as err:
        return subprocess.Popen([sys.executable, __file__, role, url, str(ledger), *args],
                                env=child_env(**env), stderr=err, text=True)  # fmt: skip


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL a role and reap it."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def lines(path: Path, kind: str) -> int:
    """How many ``kind`` lines a ledger file holds so far."""
    try:
        return sum(1 for line in path.read_text().splitlines() if line.startswith(kind + " "))
    except FileNotFoundError:
        return 0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["produce", "work", "own"])
    p.add_argument("url")
    p.add_argument("ledger")
    p.add_argument("--durable", action="store_true")
    p.add_argument("--bulk", type=int, default=1)
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--lease-ms", type=int, default=2_000)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--producers", type=int, default=2)
    a = p.parse_args()
    backend = connect(a.url)
    ledger = Writer(a.ledger)
    if a.role == "produce":
        produce(backend, ledger, durable=a.durable, bulk=a.bulk, count=a.count)
    elif a.role == "work":
        ws = workers(backend, ledger, threads=a.threads, lease_ms=a.lease_ms, sleep_s=a.sleep)
        time.sleep(MAX_SECONDS)
        for w in ws:
            w.close()
    else:  # own: producers and workers in the process that owns the engine's data file
        ws = workers(backend, ledger, threads=a.threads, lease_ms=a.lease_ms, sleep_s=a.sleep)
        ps = [threading.Thread(target=produce, args=(backend, ledger),
                               kwargs={"durable": a.durable, "bulk": a.bulk})
              for _ in range(a.producers)]  # fmt: skip
        for t in ps:
            t.start()
        for t in ps:
            t.join()
        for w in ws:
            w.close()
    backend.close()


if __name__ == "__main__":
    main()
