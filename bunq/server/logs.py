"""Structured logs: one JSON object per line on stderr."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Format a record as ``{"ts", "level", "logger", "msg", ...extra}``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup(level: str = "INFO", stream: Any = None) -> None:
    """Send ``bunq.*`` loggers to ``stream`` (stderr) as JSON lines at ``level``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("bunq")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
