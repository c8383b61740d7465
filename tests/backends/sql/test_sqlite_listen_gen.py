"""SQLite writers remember whether a queue's events are read, without a statement per
transaction: a registration bumps a generation every process maps (``.sharedcount``),
and a writer re-reads the registry only when it moved or what it read has lapsed.

These check that the remembered answer never hides a reader: one registered after a
writer remembered "nobody reads", from another backend object or another process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from bunq import connect
from bunq.backends.eventlog import LISTEN_NS
from bunq.job import DEFAULT_OPTIONS, NewJob
from bunq.jobevents import EventKind


def add(backend: object, queue: str, jid: str) -> None:
    backend.add([NewJob(queue, "j", {"n": 1}, DEFAULT_OPTIONS, jid)])  # type: ignore[attr-defined]


def added_ids(events: list) -> list[str]:  # type: ignore[type-arg]
    return [e.job_id for e in events if e.kind == EventKind.ADDED]


def event_rows(backend: object) -> int:
    with backend._read() as tx:  # type: ignore[attr-defined]
        return int(tx.sql("SELECT COUNT(*) FROM events", {})[0][0])


def test_a_reader_registered_after_the_writer_remembered_nobody_gets_the_next_add(
        tmp_path: Path) -> None:  # fmt: skip
    path = tmp_path / "gen.db"
    writer, other = connect(f"sqlite:///{path}"), connect(f"sqlite:///{path}")
    try:
        add(writer, "q", "before")  # remembers: nobody reads q
        assert event_rows(writer) == 0
        reader = other.event_reader("q")  # another backend object: its own mapping
        add(writer, "q", "after")
        got: list[str] = []
        deadline = time.monotonic() + 5
        while "after" not in got and time.monotonic() < deadline:
            got += added_ids(reader.read(200))
        assert got == ["after"]
        reader.close()
    finally:
        writer.close()
        other.close()


def test_a_reader_in_another_process_gets_the_next_add(tmp_path: Path) -> None:
    path = tmp_path / "gen.db"
    writer = connect(f"sqlite:///{path}")
    child = textwrap.dedent(f"""
        import sys, time
        from bunq import connect
        from bunq.jobevents import EventKind
        b = connect("sqlite:///{path}")
        r = b.event_reader("q")
        print("ready", flush=True)
        sys.stdin.readline()
        got, deadline = [], time.monotonic() + 5
        while "after" not in got and time.monotonic() < deadline:
            got += [e.job_id for e in r.read(200) if e.kind == EventKind.ADDED]
        print(",".join(got), flush=True)
        r.close(); b.close()
    """)
    try:
        add(writer, "q", "before")  # remembered before the other process registers
        p = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert p.stdout is not None and p.stdin is not None
        assert p.stdout.readline().strip() == "ready"
        add(writer, "q", "after")
        p.stdin.write("go\n")
        p.stdin.flush()
        out, _ = p.communicate(timeout=30)
        assert out.strip() == "after"
    finally:
        writer.close()


def test_a_lapsed_registration_stops_the_writes_and_a_renewed_one_restarts_them(
        tmp_path: Path) -> None:  # fmt: skip
    path = tmp_path / "gen.db"
    writer = connect(f"sqlite:///{path}")
    try:
        writer.kv_put(LISTEN_NS, "q", str(writer.clock() + 300).encode())
        add(writer, "q", "a")
        assert event_rows(writer) == 1  # registered: recorded
        time.sleep(0.4)
        add(writer, "q", "b")  # the registration it remembered has lapsed: re-read
        assert event_rows(writer) == 1
        add(writer, "q", "c")
        assert event_rows(writer) == 1
        writer.kv_put(LISTEN_NS, "q", str(writer.clock() + 60_000).encode())
        add(writer, "q", "d")
        assert event_rows(writer) == 2
    finally:
        writer.close()
