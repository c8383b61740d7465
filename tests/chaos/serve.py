"""``bunq serve`` as a child process the tests can SIGKILL and restart on the same port."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

from chaos.ledger import child_env


class Served:
    """One ``python -m bunq.server`` on 127.0.0.1; :meth:`restart` keeps its TCP port."""

    def __init__(self, cwd: Path, backend: str, *args: str) -> None:
        self.cwd = cwd
        self.args = ["--backend", backend, *args]
        self.port = 0
        self.http_port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"bunq://127.0.0.1:{self.port}?timeout=5"

    def start(self) -> Served:
        self.starts += 1
        err = open(self.cwd / f"serve-{self.starts}.err", "w")  # the child's
        proc = subprocess.Popen(
            [sys.executable, "-m", "bunq.server", "--host", "127.0.0.1", "--port", str(self.port),
             "--http-port", "0", *self.args],
            cwd=self.cwd, env=child_env(BUNQ_LOG_LEVEL="WARNING"), stdout=subprocess.PIPE,
            stderr=err, text=True)  # fmt: skip
        err.close()
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"tcp 127\.0\.0\.1:(\d+), http 127\.0\.0\.1:(\d+)", line)
        if not m:
            proc.kill()
            proc.wait()
            err_text = (self.cwd / f"serve-{self.starts}.err").read_text()
            raise AssertionError(f"bunq serve did not start: {line!r} {err_text}")
        self.port, self.http_port = int(m.group(1)), int(m.group(2))
        self.proc = proc
        return self

    def kill(self) -> None:
        """SIGKILL, and wait until the process is gone (its data-file lock with it)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def restart(self) -> Served:
        self.kill()
        return self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
