"""One log format for every entry point: ``bunq serve``, the ``bunq`` command, the handlers.

A record is one JSON object per line::

    {"ts": "2026-12-01T14:32:43.823Z", "level": "WARNING", "severity": "WARNING",
     "logger": "bunq.jobs", "message": "job failed, will retry", "job_id": "…", …}

``ts`` is UTC with milliseconds; ``level`` and ``severity`` (the key Google Cloud
Logging reads) carry the same name; ``logger`` is the ``bunq.*`` logger; every
``extra=`` field of the call follows, and ``exc`` holds a traceback. On a terminal
the same records read as text: ``14:32:43.823 WARNING bunq.jobs: job failed … k=v``.

:func:`setup` is called once by an entry point; library code only logs.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any, Literal

Format = Literal["auto", "json", "text"]
FORMATS: tuple[Format, ...] = ("auto", "json", "text")

_STD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STD}


def _ts(record: logging.LogRecord, fmt: str = "%Y-%m-%dT%H:%M:%S") -> str:
    return time.strftime(fmt, time.gmtime(record.created)) + f".{int(record.msecs):03d}"


class JsonFormatter(logging.Formatter):
    """A record as one JSON line (the schema above)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": _ts(record) + "Z",
            "level": record.levelname,
            "severity": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(_fields(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """A record as a line a person reads: time, level, logger, message, then k=v."""

    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{k}={v}" for k, v in _fields(record).items() if v is not None)
        line = f"{_ts(record, '%H:%M:%S')} {record.levelname} {record.name}: {record.getMessage()}"
        if extra:
            line += f" [{extra}]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def formatter(fmt: Format, stream: IO[str]) -> logging.Formatter:
    """``auto`` is text on a terminal, JSON anywhere else (a file, a pipe, a collector)."""
    if fmt == "auto":
        isatty = getattr(stream, "isatty", None)
        fmt = "text" if callable(isatty) and isatty() else "json"
    return TextFormatter() if fmt == "text" else JsonFormatter()


def setup(level: str = "INFO", fmt: Format = "auto", stream: IO[str] | None = None) -> None:
    """Send the ``bunq`` loggers to ``stream`` (stderr) at ``level`` in ``fmt``.

    :raises ValueError: an unknown level or format.
    """
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    stream = stream or sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter(fmt, stream))
    root = logging.getLogger("bunq")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
