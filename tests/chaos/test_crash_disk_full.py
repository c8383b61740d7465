"""Disk full: SQLite and the memory engine's write-behind on a 4 MB tmpfs.

Jobs (2 KB payloads, each with its own ``job_id``) are added until an add is
refused. The refusal must be a typed ``BackendUnavailable``; every add
acknowledged before it is there (and on disk after a restart); the refused
add is not stored; once space is freed (a ballast file is deleted) adds work
again. Mounting needs root (CI runs as root); elsewhere these tests skip and
say why, unless ``BUNQ_REQUIRE_BACKENDS`` names ``tmpfs`` (then they fail).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import missing

from bunq import Queue, connect
from bunq.errors import BackendUnavailable, BunqError

pytestmark = pytest.mark.slow

PAYLOAD = "x" * 2_000
BULK = 20


@pytest.fixture(scope="module")
def tmpfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Path]]:
    """Return ``mount()``: a fresh 4 MB tmpfs each call, unmounted after the module."""
    mounted: list[Path] = []

    def mount() -> Path:
        where = tmp_path_factory.mktemp("full")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode:  # skip, or fail when BUNQ_REQUIRE_BACKENDS names "tmpfs"
            missing("tmpfs", f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


@dataclass
class Outcome:
    acked: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # ids of the bulk add that was refused
    error: BaseException | None = None
    refused_after_s: float = 0.0
    recovered_after_s: float = 0.0
    stored_after_restart: set[str] = field(default_factory=set)


def fill_then_free(scheme: str, where: Path, durable: bool) -> Outcome:
    """Add until refused, free the ballast, add again, restart, and look everything up."""
    url = {"sqlite": f"sqlite:///{where / 'q.db'}", "memory": f"memory://?data={where / 'e.db'}"}[
        scheme
    ]
    ballast = where / "ballast"  # 512 KB that frees space when deleted
    ballast.write_bytes(b"\0" * 512 * 1024)
    out = Outcome()
    backend = connect(url)
    q = Queue("full", backend)
    opts: dict[str, Any] = {"durable": True} if durable else {}
    i = 0
    deadline = time.monotonic() + 60
    while out.error is None:
        assert time.monotonic() < deadline, "4 MB never filled up"
        ids = [f"j{i + k}" for k in range(BULK)]
        t0 = time.monotonic()
        try:
            jobs = q.add_bulk([("job", PAYLOAD, {"job_id": jid, **opts}) for jid in ids])
        except BunqError as exc:
            out.error, out.refused, out.refused_after_s = exc, ids, time.monotonic() - t0
            break
        out.acked += [j.id for j in jobs]
        i += BULK
    ballast.unlink()
    t0 = time.monotonic()
    while True:  # the service comes back once there is space again
        try:
            q.add("after", PAYLOAD, job_id=f"after{i}", **opts)
            break
        except BunqError:
            assert time.monotonic() - t0 < 60, "no recovery within 60 s of freeing space"
            time.sleep(0.2)
            i += 1
    out.recovered_after_s = time.monotonic() - t0
    backend.close()
    backend = connect(url)
    try:
        out.stored_after_restart = {
            jid for jid in out.acked + out.refused if backend.get_job(jid) is not None
        }  # fmt: skip
    finally:
        backend.close()
    print(
        f"\n{url.split(':')[0]} disk full after {len(out.acked)} acks: {out.error!r} in "
        f"{out.refused_after_s:.1f} s; recovered {out.recovered_after_s:.1f} s after freeing"
    )
    return out


@pytest.fixture(scope="module")
def sqlite_full(tmpfs: Callable[[], Path]) -> Outcome:
    return fill_then_free("sqlite", tmpfs(), False)


@pytest.fixture(scope="module")
def memory_full(tmpfs: Callable[[], Path]) -> Outcome:
    return fill_then_free("memory", tmpfs(), True)


def test_sqlite_disk_full_refuses_typed_keeps_every_ack_and_recovers(sqlite_full: Outcome) -> None:
    out = sqlite_full
    assert isinstance(out.error, BackendUnavailable), repr(out.error)
    assert len(out.acked) > 100  # the disk really filled with jobs
    assert set(out.acked) <= out.stored_after_restart  # 0 lost
    assert not set(out.refused) & out.stored_after_restart  # the refused add left nothing


def test_memory_durable_disk_full_refuses_typed_keeps_every_ack_and_recovers(
    memory_full: Outcome,
) -> None:
    out = memory_full
    assert isinstance(out.error, BackendUnavailable), repr(out.error)
    assert len(out.acked) > 100
    assert set(out.acked) <= out.stored_after_restart  # 0 lost


def test_memory_durable_add_refused_on_disk_full_is_not_stored(memory_full: Outcome) -> None:
    assert not set(memory_full.refused) & memory_full.stored_after_restart
