"""The write-behind never drops a captured change (issue 12, items 1 and 7).

Each test writes through ``memory://?data=`` and reads the file back with a
fresh engine (as a restart would), so "on disk" is what recovery sees.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bunq import BackendError, BackendUnavailable, ValidationError
from bunq.backends import connect
from bunq.backends.embedded import EmbeddedBackend
from bunq.job import FailureReason, JobState
from bunq.policy import FailDecision
from bunq.queue import new_job


def open_(path: str) -> EmbeddedBackend:
    b = connect(f"memory://?data={path}")
    assert isinstance(b, EmbeddedBackend)
    return b


def add(b: EmbeddedBackend, name: str = "j", **opts: Any) -> Any:
    return b.add([new_job("q", name, None, opts)])[0]


def on_disk(path: str) -> EmbeddedBackend:
    """A fresh engine over the file: what a restart would recover."""
    return open_(path)


BAD_ADDS = [
    pytest.param({"delay": 2**64}, id="delay-2^64"),
    pytest.param({"ttl": 2**64 - 1}, id="ttl-2^64"),
    pytest.param({"delay": 10**30}, id="delay-10^30"),
    pytest.param({"job_id": "id-\ud800"}, id="surrogate-job_id"),
    pytest.param({"unique_key": "k-\udcff"}, id="surrogate-unique_key"),
    pytest.param({"group": "g-\udc80"}, id="surrogate-group"),
    pytest.param({"name": "n-\udc80"}, id="surrogate-name"),
    pytest.param({"name": "n\x00"}, id="nul-name"),
    pytest.param({"backoff": {"type": "fixed", "delay": 2**70}}, id="backoff-2^70"),
]


@pytest.mark.parametrize("bad", BAD_ADDS)
def test_an_unstorable_add_is_refused_and_durable_adds_around_it_are_kept(
    tmp_path: Any, bad: dict[str, Any]
) -> None:
    """Before: the bad job was admitted, its flush failed and took every change of
    the window with it; the durable adds around it returned OK and were gone."""
    path = str(tmp_path / "wb.db")
    b = open_(path)
    first = add(b, "first", durable=True)
    bad = dict(bad)
    name = bad.pop("name", "bad")
    with pytest.raises(ValidationError) as err:
        add(b, name, **bad)
    assert err.value.code == "validation"
    second = add(b, "second", durable=True)
    plain = [add(b, f"plain-{i}") for i in range(20)]
    b.close()
    again = on_disk(path)
    try:
        assert again.get_job(first.id) is not None
        assert again.get_job(second.id) is not None
        assert all(again.get_job(j.id) is not None for j in plain)
        assert again.counts("q")[JobState.WAITING] == 22  # the bad job is nowhere
    finally:
        again.close()


def test_a_surrogate_in_an_error_is_stored_escaped_and_finished_jobs_stay_finished(
    tmp_path: Any,
) -> None:
    """Before: the failing job's flush raised and dropped the window: 100 completed
    jobs went back to waiting on restart (and would run again)."""
    path = str(tmp_path / "wb.db")
    b = open_(path)
    for i in range(101):
        add(b, f"j{i}")
    b.sync()
    leases = b.lease("q", 101, 60_000)
    assert len(leases) == 101
    bad = leases[0]
    b.complete_many([(lease, i) for i, lease in enumerate(leases[1:])])
    error = "cannot open /tmp/\udcff\udcfe.txt\x00"  # a surrogateescape'd file name
    assert b.fail(bad, error, FailDecision("dlq", 0, FailureReason.EXPLICIT_FAIL)).value == "ok"
    b.close()
    again = on_disk(path)
    try:
        counts = again.counts("q")
        assert counts[JobState.COMPLETED] == 100
        assert counts[JobState.FAILED] == 1 and counts[JobState.WAITING] == 0
        stored = again.get_job(bad.id)
        assert stored is not None
        assert stored.error == "cannot open /tmp/\\udcff\\udcfe.txt\\x00"
        stored.error.encode("utf-8")  # storable text
    finally:
        again.close()


def test_an_unencodable_record_is_kept_logged_and_reported_the_rest_commits(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Defense in depth: a record validation let through and that cannot be encoded.

    Before: the whole window was dropped silently and sync() returned OK.
    """
    path = str(tmp_path / "wb.db")
    b = open_(path)
    before = add(b, "before")
    poisoned = add(b, "poisoned")
    after = add(b, "after")
    rec = b.find(poisoned.id)[1]  # type: ignore[index]
    rec.run_at = 2**70  # what an unchecked delay used to produce
    with caplog.at_level(logging.ERROR, logger="bunq.engine"), pytest.raises(BackendError):
        b.sync()
    assert any(poisoned.id in r.getMessage() for r in caplog.records)
    assert b.get_job(poisoned.id) is not None  # kept in memory, still dirty
    assert any(poisoned.id in (s.dirty or {}) for s in b.shards)
    rec.run_at = b.clock()  # repaired: the next flush writes it
    b.sync()
    b.close()
    again = on_disk(path)
    try:
        assert all(again.get_job(j.id) is not None for j in (before, poisoned, after))
    finally:
        again.close()


def test_a_failed_commit_keeps_every_change_and_durable_waiters_get_an_error(
    tmp_path: Any,
) -> None:
    """The file becomes unwritable (read-only): non-durable changes are kept and
    written once it is writable again; a durable add fails at once and stores nothing."""
    path = str(tmp_path / "wb.db")
    b = open_(path)
    writer = b._writer
    kept = [add(b, f"kept-{i}") for i in range(5)]
    b.sync()
    writer.conn.execute("PRAGMA query_only = 1")  # every write now fails
    pending = [add(b, f"pending-{i}") for i in range(5)]
    time.sleep(0.2)
    assert writer.failing and writer.failures >= 1
    t0 = time.monotonic()
    with pytest.raises(BackendUnavailable):
        add(b, "durable", durable=True, job_id="durable-1")
    assert time.monotonic() - t0 < 5
    assert b.get_job("durable-1") is None  # nothing stored: a retry cannot duplicate
    writer.conn.execute("PRAGMA query_only = 0")
    again_ok = add(b, "durable", durable=True, job_id="durable-1")
    b.close()
    again = on_disk(path)
    try:
        for job in kept + pending + [again_ok]:
            assert again.get_job(job.id) is not None
        assert again.counts("q")[JobState.WAITING] == 11
    finally:
        again.close()


# ------------------------------------------------------------------------- disk full

SMALL_FS_KB = 2048


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs: a real filesystem that fills up. Skips (with the reason) where
    mounting is not allowed; CI on this machine runs as root, where it works."""
    mnt = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a small tmpfs needs root and mount(8)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL_FS_KB}k", "tmpfs",
                           str(mnt)], capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(mnt: Path) -> Path:
    """Fill the filesystem to the last byte; return the filler file."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_disk_full_a_durable_add_fails_cleanly_and_nothing_is_stored(small_fs: Path) -> None:
    """Before: the add blocked 30 s, raised BackendUnavailable, and the job was kept
    and written later, so a caller that retried got a duplicate."""
    path = str(small_fs / "wb.db")
    b = open_(path)
    first = add(b, "first", durable=True)
    filler = fill(small_fs)
    payload = "x" * 4000  # a row that needs new pages
    stored = {first.id}
    refused = []
    t0 = time.monotonic()
    for i in range(20):
        jid = f"full-{i}"
        try:
            b.add([new_job("q", "full", payload, {"durable": True, "job_id": jid})])
            stored.add(jid)
        except BackendUnavailable:
            refused.append(jid)
            assert b.get_job(jid) is None  # undone: nothing stored
    assert refused, "the filesystem never filled up"
    assert time.monotonic() - t0 < 20  # each refusal is prompt, not a 30 s wait
    filler.unlink()
    retry = refused[0]
    b.add([new_job("q", "full", payload, {"durable": True, "job_id": retry})])
    stored.add(retry)
    b.close()
    again = on_disk(path)
    try:
        on_file = [j.id for j in again.get_jobs("q", JobState.WAITING, 0, 100)]
        assert sorted(on_file) == sorted(stored)  # every acknowledged add, each once
    finally:
        again.close()


def test_disk_full_non_durable_adds_are_kept_and_written_when_space_returns(
    small_fs: Path,
) -> None:
    path = str(small_fs / "wb.db")
    b = open_(path)
    filler = fill(small_fs)
    payload = "y" * 2000
    jobs = [b.add([new_job("q", "nd", payload, {})])[0] for _ in range(200)]
    time.sleep(0.3)
    assert b._writer.failing  # the writer cannot commit: the changes wait in memory
    filler.unlink()
    b.sync()
    b.close()
    again = on_disk(path)
    try:
        assert all(again.get_job(j.id) is not None for j in jobs)
    finally:
        again.close()


def test_a_full_backlog_on_an_unwritable_file_refuses_adds_at_once(tmp_path: Any) -> None:
    """While the writer fails, adds are kept up to ``max_backlog``; past it an add is
    refused at once (BackendUnavailable), with nothing stored, instead of piling up."""
    path = str(tmp_path / "wb.db")
    b = open_(path)
    writer = b._writer
    writer.max_backlog = 150
    writer.conn.execute("PRAGMA query_only = 1")
    kept = []
    t0 = time.monotonic()
    with pytest.raises(BackendUnavailable):
        for i in range(1_000):
            kept.append(add(b, f"k{i}", job_id=f"k{i}"))
            if len(kept) == 100:
                time.sleep(0.2)  # the writer has tried and failed by now
    assert time.monotonic() - t0 < 5
    refused = f"k{len(kept)}"
    assert 100 <= len(kept) < 1_000 and b.get_job(refused) is None
    writer.conn.execute("PRAGMA query_only = 0")
    b.sync()
    b.close()
    again = on_disk(path)
    try:
        assert again.counts("q")[JobState.WAITING] == len(kept)
    finally:
        again.close()
