"""Write-behind to SQLite: restart after every kind of transition, locking, crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from bunq.backends import connect
from bunq.backends.base import DlqConfig, QueueLimits
from bunq.backends.embedded import EmbeddedBackend
from bunq.engine.builders import build_new_job
from bunq.errors import ConfigError, DataFileLocked
from bunq.job import FailureReason, JobState, new_job_id
from bunq.policy import decide_failure
from bunq.queue import new_job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def state(b: EmbeddedBackend) -> dict[str, Any]:
    """Everything a restart must keep, in comparable form."""
    jobs = {}
    for shard in b.shards:
        for rec in shard.jobs.values():
            j = b.get_job(rec.id)
            assert j is not None
            jobs[j.id] = (j.queue, j.name, j.data, j.state, j.opts, j.attempts, j.created_at,
                          j.run_at, j.finished_at, j.progress, j.result, j.error, j.reason,
                          j.history, j.stalls, rec.pending, rec.dlq_retries)  # fmt: skip
    queues = {q: (b.counts(q), b.is_paused(q), b.get_limits(q), b.dlq_config(q),
                  [j.id for j in b.get_jobs(q, JobState.WAITING)],
                  [e.job.id for e in b.dlq_list(q)]) for q in b.queues()}  # fmt: skip
    uniq = {k: tuple(v) for shard in b.shards for k, v in shard.unique.items()}
    return {"jobs": jobs, "queues": queues, "uniq": uniq, "kv": b.kv_list("ns")}


def reopen(b: EmbeddedBackend, clock: Any) -> EmbeddedBackend:
    path = b.data_path
    b.close()
    return EmbeddedBackend(path, clock=clock, shards=2)


def add(b: EmbeddedBackend, queue: str = "q", data: Any = None, **opts: Any) -> Any:
    return b.add([new_job(queue, "job", data, opts)])[0]


def test_restart_after_every_transition(tmp_path: Any, clock: Any) -> None:
    b = EmbeddedBackend(str(tmp_path / "e.db"), clock=clock, shards=2)

    def fail_one(queue: str = "q") -> None:
        lease = b.lease(queue, 1, 1_000)[0]
        b.fail(lease, "boom", decide_failure(lease.job, clock()), 3)

    steps = [
        lambda: add(b, data={"a": [1, 2]}, priority=3),
        lambda: add(b, "other", data="later", delay=5_000, ttl=60_000),
        lambda: add(b, data="dedup", job_id="custom", unique_key="u", unique_ttl=90_000),
        lambda: add(b, data="child", depends_on=["custom"], parent_id="custom"),
        lambda: b.complete(b.lease("q", 1, 1_000)[0], {"ok": True}),
        lambda: b.update_progress("custom", 42),
        lambda: fail_one(),  # retry with backoff: delayed
        lambda: clock.advance(10_000),
        lambda: [b.complete(x, x.job.data) for x in b.lease("q", 5, 1_000)],
        lambda: add(b, "dead", attempts=1),
        lambda: fail_one("dead"),
        lambda: b.dlq_config("dead", DlqConfig(max_entries=5, auto_retry=True)),
        lambda: b.dlq_retry("dead"),
        lambda: fail_one("dead"),
        lambda: b.pause("other"),
        lambda: b.set_limits("q", QueueLimits(rate_max=5, concurrency=3, group_concurrency=1)),
        lambda: b.kv_put("ns", "k", b"v1", create=True),
        lambda: b.kv_put("ns", "k", b"v2", expected=b"v1"),
        lambda: add(b, data="rm", remove_on_complete=True),
        lambda: b.complete(b.lease("q", 1, 1_000)[0]),
        lambda: b.lease("q", 1, 10) and clock.advance(11) and b.sweep(),  # stall, requeued
        lambda: add(b, "gone", data=1) and b.obliterate("gone"),
        lambda: add(b, "drained", delay=5) and b.drain("drained"),
        lambda: b.kv_delete("ns", "k"),
        lambda: b.resume("other"),
    ]
    for i, step in enumerate(steps):
        step()
        before = state(b)
        b = reopen(b, clock)
        assert state(b) == before, f"step {i}"
    assert b.counts("dead")[JobState.FAILED] == 1
    b.close()


def test_active_jobs_at_restart_are_charged_a_stall(tmp_path: Any, clock: Any) -> None:
    b = EmbeddedBackend(str(tmp_path / "e.db"), clock=clock)
    keep = add(b, attempts=3)
    last = add(b, attempts=1)
    leases = b.lease("q", 2, 60_000)
    assert {x.id for x in leases} == {keep.id, last.id}
    b.sync()
    b = reopen(b, clock)
    got = b.get_job(keep.id)
    assert got.state is JobState.WAITING and got.stalls == 1 and got.attempts == 1
    assert got.history[-1].reason is FailureReason.STALLED
    dead = b.get_job(last.id)
    assert dead.state is JobState.FAILED and dead.reason is FailureReason.STALLED
    assert b.lease("q", 5, 1_000)[0].attempt == 2
    b.close()


def test_dependencies_and_children_results_survive(tmp_path: Any, clock: Any) -> None:
    b = EmbeddedBackend(str(tmp_path / "e.db"), clock=clock, shards=4)
    a = add(b, "qa", data=1, parent_id="p")
    c = add(b, "qc", data=2, depends_on=[a.id])
    b = reopen(b, clock)
    b.complete(b.lease("qa", 1, 1_000)[0], "ra")
    assert b.get_job(c.id).state is JobState.WAITING
    b = reopen(b, clock)
    assert b.get_children_results("p") == {a.id: "ra"}
    assert b.lease("qc", 1, 1_000)[0].id == c.id
    b.close()


def test_a_relinked_parent_survives(tmp_path: Any, clock: Any) -> None:
    b = EmbeddedBackend(str(tmp_path / "e.db"), clock=clock, shards=4)
    kid = add(b, "qa", data=1, parent_id="pending")
    parent = add(b, "qp", depends_on=[kid.id])
    b = reopen(b, clock)  # the child's row exists before its options change
    b.set_parent(kid.id, parent.id)
    b = reopen(b, clock)
    assert b.get_job(kid.id).opts.parent_id == parent.id
    b.complete(b.lease("qa", 1, 1_000)[0], "ra")
    assert b.get_children_results(parent.id) == {kid.id: "ra"}
    b.close()


def test_second_opener_gets_data_file_locked(tmp_path: Any) -> None:
    path = str(tmp_path / "e.db")
    b = connect(f"memory://?data={path}")
    with pytest.raises(DataFileLocked) as err:
        connect(f"memory://?data={path}")
    assert err.value.data["owner"]["pid"] == os.getpid()
    code = f"import sys; sys.path.insert(0, {ROOT!r}); from bunq.backends import connect\n" \
           f"try:\n    connect('memory://?data={path}')\nexcept Exception as e:\n" \
           f"    print(type(e).__name__, e.data['owner']['pid'])"  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["DataFileLocked", str(os.getpid())]
    b.close()
    connect(f"memory://?data={path}").close()  # released on close


def test_url_options_and_independent_engines(tmp_path: Any) -> None:
    a, b = connect("memory://"), connect("memory://?shards=4&max_payload=100")
    add(a)
    assert sum(b.counts("q").values()) == 0 and len(b.shards) == 4 and b.max_payload == 100
    for bad in ("memory://?nope=1", "memory://?shards=x", "memory://host/path", "memory://?data="):
        with pytest.raises(ConfigError):
            connect(bad)
    assert a.kind == "memory" and "multi_process" not in {c.value for c in a.capabilities}
    a.close()
    b.close()


CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from bunq.backends import connect
from bunq.queue import new_job
b = connect("memory://?data={path}")
i = 0
while True:
    job = b.add([new_job("q", "j", i, {{"durable": {durable}}})])[0]
    sys.stdout.write(f"{{job.id}} {{time.monotonic()}}\\n")
    sys.stdout.flush()
    i += 1
"""


def run_and_kill(path: str, durable: bool, n: int) -> tuple[list[tuple[str, float]], float]:
    """Start a child adding jobs, SIGKILL it after ``n`` acknowledged adds."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(root=ROOT, path=path,
                                                                 durable=durable)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    acked = []
    assert proc.stdout is not None
    while len(acked) < n:
        line = proc.stdout.readline()
        assert line, "child died"
        jid, at = line.split()
        acked.append((jid, float(at)))
    os.kill(proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    proc.wait()
    for line in proc.stdout:  # acks written before the kill landed
        jid, at = line.split()
        acked.append((jid, float(at)))
    return acked, killed


@pytest.mark.slow
def test_durable_adds_survive_sigkill(tmp_path: Any) -> None:
    path = str(tmp_path / "crash.db")
    acked, _ = run_and_kill(path, True, 300)
    b = connect(f"memory://?data={path}")
    missing = [jid for jid, _ in acked if b.get_job(jid) is None]
    b.close()
    assert missing == []


@pytest.mark.slow
def test_write_behind_loss_is_bounded_by_the_window(tmp_path: Any) -> None:
    path = str(tmp_path / "crash.db")
    acked, killed = run_and_kill(path, False, 20_000)
    b = connect(f"memory://?data={path}")
    lost = [at for jid, at in acked if b.get_job(jid) is None]
    b.close()
    # Loss window: how old the oldest lost acknowledgement was when the kill landed.
    window_ms = (killed - min(lost)) * 1000 if lost else 0.0
    print(f"\nwrite-behind crash: {len(acked)} acknowledged, {len(lost)} lost, "
          f"oldest lost ack {window_ms:.1f} ms before the kill")  # fmt: skip
    assert len(lost) <= 2_000  # the backlog bound (max_backlog=1,000) plus one batch
    assert window_ms < 1_000
    newest = sorted(at for _, at in acked)[-len(lost) :] if lost else []
    assert sorted(lost) == newest  # only the newest acks can be lost: a prefix is on disk


def test_a_bulk_is_acknowledged_while_it_commits_and_the_next_add_waits(tmp_path: Any) -> None:
    """An add past ``max_backlog`` returns while its rows commit (a stream of bulks
    overlaps the next admission with the commit); the next add is the one that waits
    (docs/engine.md, "Loss window"), and everything is on disk after it."""
    import threading

    path = str(tmp_path / "pipelined.db")
    b = connect(f"memory://?data={path}")
    assert isinstance(b, EmbeddedBackend)
    writer = b._writer
    bulk = [new_job("q", "j", i, {}) for i in range(writer.max_backlog)]
    done: list[str] = []

    def add(jobs: list[Any], tag: str) -> None:
        b.add(jobs)
        done.append(tag)

    with writer.wlock:  # the writer cannot capture or commit meanwhile
        first = threading.Thread(target=add, args=(bulk, "bulk"))
        first.start()
        first.join(5)
        assert done == ["bulk"]  # acknowledged without waiting for its commit
        second = threading.Thread(target=add, args=([new_job("q", "j", "next", {})], "next"))
        second.start()
        second.join(0.3)
        assert done == ["bulk"]  # the backlog is full: this add waits for a commit
    second.join(10)
    assert done == ["bulk", "next"]
    b.close()
    again = connect(f"memory://?data={path}")
    try:
        assert again.counts("q")[JobState.WAITING] == writer.max_backlog + 1
    finally:
        again.close()


def test_a_bulk_of_one_options_object_encodes_it_once(
    tmp_path: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write-behind encodes a bulk's shared options once per flush, and jobs of
    interleaved options objects each get their own back after a restart."""
    from bunq.engine import writebehind

    calls: list[object] = []
    real = writebehind.options_blob

    def counted(opts: Any) -> bytes:
        calls.append(opts)
        return real(opts)

    monkeypatch.setattr(writebehind, "options_blob", counted)
    b = EmbeddedBackend(str(tmp_path / "e.db"), clock=clock, shards=1)
    one = new_job("q", "job", 0, {"priority": 1}).opts
    b.add([build_new_job("q", "job", i, one, new_job_id()) for i in range(50)])
    assert b.store is not None
    b.store.sync()
    assert len(calls) == 1
    other = new_job("q", "job", 0, {"priority": 7}).opts
    b.add([build_new_job("q", "job", i, one if i % 2 else other, new_job_id())
           for i in range(6)])  # fmt: skip
    before = state(b)
    b = reopen(b, clock)
    assert state(b) == before
    priorities = [b.get_job(r.id).opts.priority for s in b.shards for r in s.jobs.values()]  # type: ignore[union-attr]
    assert sorted(priorities) == [1] * 53 + [7] * 3
    b.close()
