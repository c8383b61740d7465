"""bunq.logs: one schema for every entry point, JSON off a terminal, text on one."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from bunq import logs
from bunq.errors import ConfigError
from bunq.settings import Settings


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    """setup() rewires the ``bunq`` logger: put it back for the other tests (caplog)."""
    root = logging.getLogger("bunq")
    saved = (root.handlers[:], root.level, root.propagate)
    yield
    root.handlers[:], root.level, root.propagate = saved[0], saved[1], saved[2]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def emit(stream: io.StringIO, fmt: logs.Format = "auto") -> str:
    logs.setup("INFO", fmt, stream)
    log = logging.getLogger("bunq.test")
    try:
        raise ValueError("boom")
    except ValueError:
        log.warning("job %s failed", "j1", extra={"job_id": "j1", "attempt": 2}, exc_info=True)
    log.debug("not shown at INFO")
    return stream.getvalue()


def test_json_lines_off_a_terminal() -> None:
    [line] = emit(io.StringIO()).splitlines()[:1]
    rec = json.loads(line)
    assert list(rec)[:5] == ["ts", "level", "severity", "logger", "message"]
    assert (rec["level"], rec["severity"], rec["logger"]) == ("WARNING", "WARNING", "bunq.test")
    assert rec["message"] == "job j1 failed" and (rec["job_id"], rec["attempt"]) == ("j1", 2)
    assert rec["ts"].endswith("Z") and "ValueError: boom" in rec["exc"]
    assert len(emit(io.StringIO()).splitlines()) == 1  # DEBUG dropped, one line per record


def test_text_on_a_terminal() -> None:
    out = emit(Tty())
    first = out.splitlines()[0]
    assert "WARNING bunq.test: job j1 failed [job_id=j1 attempt=2]" in first
    assert "Traceback" in out and "ValueError: boom" in out


def test_the_format_can_be_forced() -> None:
    assert json.loads(emit(Tty(), "json").splitlines()[0])["job_id"] == "j1"
    assert emit(io.StringIO(), "text").splitlines()[0].split(" ", 1)[1].startswith("WARNING")
    with pytest.raises(ValueError, match="log format"):
        logs.setup("INFO", "xml", io.StringIO())  # type: ignore[arg-type]


def test_settings_refuse_unknown_formats_and_levels() -> None:
    assert Settings.from_env({"BUNQ_LOG_FORMAT": "json"}).log_format == "json"
    with pytest.raises(ConfigError, match="BUNQ_LOG_FORMAT"):
        Settings.from_env({"BUNQ_LOG_FORMAT": "yaml"})
    with pytest.raises(ConfigError, match="BUNQ_LOG_LEVEL"):
        Settings.from_env({"BUNQ_LOG_LEVEL": "LOUD"})
