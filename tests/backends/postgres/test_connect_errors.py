"""A first connection that fails says why at once: who/where is configuration (78),
a server that is not there is retried for ``retry_ms`` then unavailable (69)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import PG_DSN, _postgres

from bunq.backends import connect
from bunq.errors import BackendUnavailable, ConfigError

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def server_up(tmp_path: Path) -> None:
    """These tests need the real server (to tell a wrong role from a missing server)."""
    _postgres(tmp_path).close()


def dsn(netloc: str, db: str = "test", query: str = "") -> str:
    host = urlsplit(PG_DSN).netloc.rpartition("@")[2]
    return f"postgresql://{netloc.replace('HOST', host)}/{db}{query}"


@pytest.mark.parametrize("url, cause", [
    (dsn("nobody_here:S3CRET@HOST"), 'role "nobody_here" does not exist'),
    (dsn("postgres@HOST", "no_such_db"), 'database "no_such_db" does not exist'),
    (dsn("postgres@no-such-host.invalid"), "failed to resolve host"),
])  # fmt: skip
def test_who_or_where_is_wrong_fails_at_once_as_config(url: str, cause: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as info:
        connect(url)
    assert time.monotonic() - t0 < 5  # no retries
    assert cause in str(info.value) and "S3CRET" not in str(info.value)


def test_a_server_that_is_not_there_is_retried_then_unavailable() -> None:
    t0 = time.monotonic()
    with pytest.raises(BackendUnavailable, match="Connection refused"):
        connect(dsn("postgres@127.0.0.1:1", query="?retry_ms=1500"))
    assert 0.5 < time.monotonic() - t0 < 10  # retried (backoff stops short of overshooting)


def test_the_command_line_exits_78_with_the_cause_in_one_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "bunq", "stats", "--backend",
                          dsn("nobody_here:S3CRET@HOST")], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 78, out.stderr
    assert 'role "nobody_here" does not exist' in out.stderr and "S3CRET" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
