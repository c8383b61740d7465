"""Fixtures for the Redis backend's own tests.

``backend``: a RedisBackend on the shared server (``BUNQ_REDIS_URL``) under a fresh key
prefix, with the fake clock. ``own_redis``: a private ``redis-server`` on a free port
(no persistence), which a test may stop and restart; the shared server at 6379 is
used by others and is never restarted.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture
def backend(make_backend: Callable[..., Any], clock: Any) -> Any:
    return make_backend("redis", clock=clock)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnRedis:
    """A redis-server subprocess this test owns: start, kill -9, restart on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.extra: list[str] = []  # more redis-server arguments
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no", *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        end = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)

    def restart(self, *extra: str) -> None:
        """Kill the server and start it again on its port with more arguments."""
        self.kill()
        self.extra = list(extra)
        self.start()

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        from conftest import missing

        missing("redis", "redis-server is not on PATH (a test starts its own server)")
    server = OwnRedis()
    server.start()
    yield server
    server.kill()


@pytest.fixture
def redis_without_functions(own_redis: OwnRedis) -> OwnRedis:
    """``own_redis`` restarted without the FUNCTION command, as Redis 6 answers."""
    own_redis.restart("--rename-command", "FUNCTION", "")
    return own_redis
