"""``python -m bunq.server``: where it listens, and a graceful SIGTERM.

A SIGKILL of the server under load is in the chaos suite (tests/chaos/test_crash_server.py).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from chaos.serve import Served
from server.raw import Raw

from bunq.backends.sql.sqlite import SQLiteBackend
from bunq.job import JobState
from bunq.protocol import encode


def test_sigterm_finishes_in_flight_commands_and_exits_zero(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    served = Served(tmp_path, f"sqlite:///{db}").start()
    proc, port = served.proc, served.port
    assert proc is not None
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
    served = Served(tmp_path, f"sqlite:///{tmp_path / 'm.db'}", "--token", "t1").start()
    proc, port = served.proc, served.port
    assert proc is not None
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
