"""A local HTTP receiver for webhook tests: records each POST, answers from a script."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """Answers each POST (or PUT) with the next status of ``script`` (then 200)."""

    def __init__(self, script: list[int] | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.script = list(script or [])
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.requests.append(
                        Request(self.command, self.path, dict(self.headers), body)
                    )
                    status = receiver.script.pop(0) if receiver.script else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_PUT = do_POST

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, n: int, timeout: float = 10.0) -> list[Request]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if len(self.requests) >= n:
                    return list(self.requests)
            time.sleep(0.01)
        raise AssertionError(f"expected {n} requests, got {len(self.requests)}")


@contextmanager
def receiver(script: list[int] | None = None, tls: ssl.SSLContext | None = None
             ) -> Iterator[Receiver]:  # fmt: skip
    r = Receiver(script, tls)
    t = threading.Thread(target=r.server.serve_forever, daemon=True)
    t.start()
    try:
        yield r
    finally:
        r.server.shutdown()
        r.server.server_close()
        t.join()


def until(cond: Callable[[], Any], timeout: float = 10.0) -> Any:
    """``cond()``'s first truthy value, polled every 10 ms; AssertionError after ``timeout`` s."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.01)
    raise AssertionError("condition not met in time")
