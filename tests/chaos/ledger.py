"""The chaos suite's one counting harness: acknowledged vs present vs settled.

Every process of a chaos test (child or the test itself) appends one line per
event to its own file in a ledger directory, line-buffered, so each line is
one ``write(2)`` that lands before the next call returns and survives a
SIGKILL of the writer (a cut-off last line, without its newline, is ignored):

- ``ack <id> <monotonic s>`` once ``add`` / ``add_bulk`` returned that id
  (the add was acknowledged);
- ``run <id> <attempt>`` when a handler starts (at-least-once: a job may run
  again after a crash);
- ``settling <id> <attempt> <token>`` just before a completion is sent, and
  ``settled <id> <attempt> <token>`` once the backend answered ``OK`` to it
  under that lease's fence (:class:`Recording`).

After the chaos, :func:`tally` counts, and :meth:`Tally.check` asserts the
invariants that docs/reliability.md states:

- **0 lost**: every acknowledged add is present in the backend (any state)
  or its completion was recorded. On SQS (no lookups by id; a completion
  deletes the message) a job whose completion was sent by a worker killed
  before the answer came back is gone for a good reason: it counts as
  settled-unconfirmed, not lost (the SQS test checks each against moto's
  record of the receipt handles it deleted). Non-durable adds on a write-behind store
  are counted, not asserted: the caller holds them to
  :data:`NON_DURABLE_LOSS_BOUND`.
- **0 settled twice**: no fence (job id, attempt, lease token) has two
  accepted completions; on backends that commit a settle before answering it
  (``settle_commits=True``: SQLite, PostgreSQL, SQS, a server over SQL) no
  *job* has two accepted completions at all: once one is recorded, every
  older lease answers ``stale``. A memory engine may record a second
  completion of a job only when the first fell in its write-behind loss
  window and a crash undid it (the job then runs again under a new fence);
  :attr:`Tally.recompleted` counts those.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bunq.job import Job, JobId, JobState, Lease, Settle

# Non-durable adds lost per SIGKILL of a write-behind owner (memory engine, or `bunq serve`
# on it) that the suite accepts. The one value to adjust when the engine's bound changes;
# docs/reliability.md quotes it with the measured figures.
NON_DURABLE_LOSS_BOUND = 2_000


class Writer:
    """One process's ledger file (append, line-buffered, thread-safe)."""

    def __init__(self, path: str | Path) -> None:
        self._f = open(path, "a", buffering=1)  # lives as long as the process
        self._lock = threading.Lock()

    def write(self, *lines: str) -> None:
        with self._lock:
            for line in lines:
                self._f.write(line + "\n")

    def acked(self, jobs: Iterable[Job]) -> None:
        now = time.monotonic()
        self.write(*(f"ack {j.id} {now:.6f}" for j in jobs))

    def ran(self, job: Job) -> None:
        self.write(f"run {job.id} {job.attempts}")

    def close(self) -> None:
        self._f.close()


class Recording:
    """A backend proxy that records each completion the backend accepted.

    Workers get this instead of the backend; everything but ``complete`` and
    ``complete_many`` passes straight through.
    """

    def __init__(self, backend: Any, ledger: Writer) -> None:
        self._backend = backend
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def complete(self, lease: Lease, result: Any = None) -> Settle:
        return self.complete_many([(lease, result)])[0]

    def complete_many(self, items: Sequence[tuple[Lease, Any]]) -> list[Settle]:
        self._ledger.write(*(f"settling {le.id} {le.attempt} {le.token}" for le, _ in items))
        answers: list[Settle] = self._backend.complete_many(items)
        self._ledger.write(*(f"settled {le.id} {le.attempt} {le.token}"
                             for (le, _), a in zip(items, answers, strict=True)
                             if a is Settle.OK))  # fmt: skip
        return answers


@dataclass
class Tally:
    """What the ledgers say, and what the backend holds of it."""

    acked: set[str] = field(default_factory=set)
    acked_at: dict[str, float] = field(default_factory=dict)  # id -> monotonic s of the ack
    runs: collections.Counter[str] = field(default_factory=collections.Counter)
    settling: dict[str, set[str]] = field(default_factory=dict)  # id -> lease tokens
    # (ledger file, id, attempt) of each run whose completion its process never sent
    unsent: list[tuple[str, str, int]] = field(default_factory=list)
    settled_attempts: dict[str, set[int]] = field(default_factory=dict)
    settled: collections.Counter[str] = field(default_factory=collections.Counter)
    fences: collections.Counter[tuple[str, str, str]] = field(
        default_factory=collections.Counter)  # fmt: skip
    present: set[str] = field(default_factory=set)
    not_completed: list[str] = field(default_factory=list)  # settled, yet not completed now
    states: collections.Counter[str] = field(default_factory=collections.Counter)
    unconfirmed: set[str] = field(default_factory=set)  # see tally(by_id=False)

    @property
    def lost(self) -> list[str]:
        return sorted(self.acked - self.present - set(self.settled) - self.unconfirmed)

    @property
    def fence_twice(self) -> list[tuple[str, str, str]]:
        return [f for f, n in self.fences.items() if n > 1]

    @property
    def recompleted(self) -> list[str]:
        return [jid for jid, n in self.settled.items() if n > 1]

    @property
    def reran(self) -> int:
        return sum(1 for n in self.runs.values() if n > 1)

    def orphans(self, killed: Iterable[str]) -> list[tuple[str, int]]:
        """Jobs a killed process was running (a run with no completion sent)."""
        names = set(killed)
        return [(jid, a) for f, jid, a in self.unsent if f in names]

    def not_rerun(self, orphans: Iterable[tuple[str, int]], *,
                  lease_commits: bool = True) -> list[tuple[str, int]]:  # fmt: skip
        """The orphans NOT completed afterwards under a later attempt (should be none).

        Where a lease is written behind (memory engine), the crash may undo the
        lease itself: the job then runs again under the same attempt number
        (a new token), so ``lease_commits=False`` accepts an equal attempt.
        """
        later = 1 if lease_commits else 0
        return [(jid, a) for jid, a in orphans
                if not any(b >= a + later for b in self.settled_attempts.get(jid, ()))]  # fmt: skip

    def summary(self) -> dict[str, Any]:
        return {"acked": len(self.acked), "present": len(self.present),
                "settled": len(self.settled), "unconfirmed": len(self.unconfirmed),
                "lost": len(self.lost),
                "settled_twice": len(self.fence_twice), "recompleted": len(self.recompleted),
                "ran_again": self.reran, "states": dict(self.states)}  # fmt: skip

    def check(self, *, settle_commits: bool = True) -> None:
        """Assert 0 lost and 0 settled twice (per job where ``settle_commits``)."""
        assert self.acked, "nothing was acknowledged: the test measured nothing"
        assert self.fence_twice == [], f"a fence settled twice: {self.fence_twice[:5]}"
        if settle_commits:
            assert self.recompleted == [], f"completed twice: {self.recompleted[:5]}"
            assert self.not_completed == [], f"settled, not completed: {self.not_completed[:5]}"
        assert self.lost == [], f"{len(self.lost)} acknowledged adds lost: {self.lost[:5]}"


def read(directory: Path) -> Tally:
    """Parse every ledger file under ``directory``."""
    t = Tally()
    for path in sorted(directory.glob("*.log")):
        text = path.read_text()
        lines = text.split("\n")[:-1]  # the last element is "" or a line cut by a SIGKILL
        running: dict[str, int] = {}  # id -> attempt of a run whose completion is not sent
        for line in lines:
            kind, *rest = line.split()
            if kind == "ack":
                t.acked.add(rest[0])
                t.acked_at[rest[0]] = float(rest[1])
            elif kind == "run":
                t.runs[rest[0]] += 1
                running[rest[0]] = int(rest[1])
            elif kind == "settling":
                t.settling.setdefault(rest[0], set()).add(rest[2])
                running.pop(rest[0], None)
            elif kind == "settled":
                t.settled[rest[0]] += 1
                t.fences[(rest[0], rest[1], rest[2])] += 1
                t.settled_attempts.setdefault(rest[0], set()).add(int(rest[1]))
        t.unsent += [(path.name, jid, a) for jid, a in running.items()]
    return t


def tally(directory: Path, backend: Any, *, by_id: bool = True, queue: str = "chaos") -> Tally:
    """Read the ledgers and look every acknowledged id up in ``backend``.

    ``by_id=False`` (SQS: no lookups by id): the test drained the queue
    first, so an acknowledged add is present only as a dead letter; whatever
    is neither settled nor in the DLQ is lost, unless a worker sent its
    completion and was killed before the answer (``unconfirmed``).
    """
    t = read(directory)
    if not by_id:
        for entry in backend.dlq_list(queue, limit=1_000):
            t.present.add(entry.job.id)
            t.states["failed"] += 1
        t.unconfirmed = set(t.settling) - set(t.settled) - t.present
        return t
    settled = set(t.settled)
    for jid in t.acked:
        job = backend.get_job(JobId(jid))
        if job is not None:
            t.present.add(jid)
            t.states[job.state.value] += 1
            if jid in settled and job.state is not JobState.COMPLETED:
                t.not_completed.append(jid)
    return t


def ledger_dir(tmp_path: Path) -> Path:
    d = tmp_path / "ledger"
    d.mkdir(exist_ok=True)
    return d


def child_env(**extra: str) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root, **extra}
