"""``python -m bunq.server``: where it listens, and a graceful SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from server.raw import Raw

from bunq.backends.sql.sqlite import SQLiteBackend
from bunq.job import JobState
from bunq.protocol import encode

ROOT = Path(__file__).resolve().parents[2]


def start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], int, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BUNQ_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bunq.server", "--port", "0", "--http-port", "0", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"tcp 127\.0\.0\.1:(\d+), http 127\.0\.0\.1:(\d+)", line)
    assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, int(m.group(1)), int(m.group(2))


def test_sigterm_finishes_in_flight_commands_and_exits_zero(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    proc, port, _ = start(tmp_path, "--backend", f"sqlite:///{db}")
    try:
        c, poller = Raw(port), Raw(port)
        poll_id = poller.send(
            {"cmd": "PULLB", "queue": "empty", "count": 5, "timeout": 20_000, "owner": "w"}
        )
        burst = b"".join(
            encode({"cmd": "PUSH", "queue": "q", "data": i, "reqId": f"b{i}"}) for i in range(200)
        )
        c.send(burst)
        time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        answered = set()
        try:
            while len(answered) < 200:
                reply = c.recv(5)
                assert reply["ok"] is True
                answered.add(reply["reqId"])
        except ConnectionError:
            pass
        poll = poller.recv(5)  # the long poll is answered (empty), not cut off
        assert poll["reqId"] == poll_id and poll["jobs"] == []
        assert proc.wait(10) == 0 and time.monotonic() - t0 < 5
    finally:
        if proc.poll() is None:
            proc.kill()
    stored = SQLiteBackend(str(db))
    try:  # every push that was acknowledged is on disk
        assert stored.counts("q")[JobState.WAITING] >= len(answered) > 0
    finally:
        stored.close()


def test_main_prints_where_it_listens_and_honours_env(tmp_path: Path) -> None:
    env_backup = dict(os.environ)
    proc, port, http = start(
        tmp_path, "--backend", f"sqlite:///{tmp_path / 'm.db'}", "--token", "t1"
    )
    try:
        c = Raw(port)
        assert c.call({"cmd": "Ping"})["error"] == "Not authenticated"
        assert c.call({"cmd": "Auth", "token": "t1"})["ok"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert dict(os.environ) == env_backup


def test_sigkill_loses_no_durable_push(tmp_path: Path) -> None:
    """`bunq serve` on its default engine: a durable add acknowledged before a
    SIGKILL is there after a restart on the same data file."""
    from bunq import Queue
    from bunq.backends.remote import RemoteBackend

    data = tmp_path / "kill.db"
    url = f"memory://?data={data}"
    proc, port, _ = start(tmp_path, "--backend", url)
    acked = []
    try:
        q = Queue("k", RemoteBackend.from_url(f"bunq://127.0.0.1:{port}"))
        for i in range(300):
            acked.append(q.add("job", {"i": i}, durable=True).id)
        acked += [j.id for j in q.add_bulk([("job", i, {"durable": True}) for i in range(200)])]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        q.backend.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    proc2, port2, _ = start(tmp_path, "--backend", url)
    try:
        q2 = Queue("k", RemoteBackend.from_url(f"bunq://127.0.0.1:{port2}"))
        missing = [jid for jid in acked if q2.get_job(jid) is None]
        assert missing == [] and q2.counts()["waiting"] == len(acked)
        q2.backend.close()
    finally:
        proc2.send_signal(signal.SIGTERM)
        proc2.wait(10)
