"""What the ``bunq`` command prints: JSON or text results, times, counts, progress."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from ..errors import ValidationError


def parse_json(text: str | None, what: str) -> Any:
    """``text`` as JSON (None stays None); ValidationError names ``what``."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValidationError(f"{what} is not valid JSON ({exc}): {text[:80]!r}") from None


def out(args: argparse.Namespace, data: Any, text: str) -> None:
    """Print the result: ``data`` as one JSON document with ``--json``, else ``text``."""
    print(json.dumps(data, default=str) if getattr(args, "json", False) else text)


def when(epoch_ms: int | None) -> str:
    """An epoch-ms time as ISO 8601 UTC to the second (``-`` for none)."""
    if epoch_ms is None:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_ms / 1000))


def count(n: int, noun: str) -> str:
    """``1 job``, ``2 jobs``, ``1,000 jobs``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


class Progress:
    """Progress on stderr during long work: a line rewritten in place on a terminal, a
    line every ``every_s`` seconds elsewhere (a log collector, a CronJob's log)."""

    def __init__(self, every_s: float = 5.0, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = 0.2 if self.tty else every_s
        self.t0 = self.last = time.monotonic()
        self.shown = False

    def elapsed(self) -> float:
        return max(time.monotonic() - self.t0, 1e-9)

    def update(self, line: Callable[[], str]) -> None:
        """Show ``line()`` if it is time to (it is called only then)."""
        now = time.monotonic()
        if now - self.last < self.every_s:
            return
        self.last, self.shown = now, True
        if self.tty:
            print(f"\r{line()}\033[K", end="", file=self.stream, flush=True)
        else:
            print(line(), file=self.stream, flush=True)

    def done(self) -> None:
        if self.tty and self.shown:
            print(file=self.stream)
