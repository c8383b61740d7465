"""``bunq serve`` never prints a backend password (issue 12, item 6)."""

from __future__ import annotations

import getpass
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from conftest import PG_DSN, _drop_pg_schema, _postgres

ROOT = Path(__file__).resolve().parents[2]


def _serve(url: str, tmp_path: Path, timeout: float = 30) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bunq.server", "--port", "0", "--http-port", "-1",
         "--backend", url, "--log-level", "WARNING"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    "url, code",
    [
        ("postgresql://u:S3CRET@127.0.0.1:5432/test?pool_min=lots", 78),  # a bad option
        ("postgresql://u:S3CRET@127.0.0.1:1/test?connect_timeout=2&retry_ms=500", 69),  # no one
        ("bunq://:S3CRET@127.0.0.1:1?timeout=soon", 78),
    ],
)
def test_errors_at_startup_do_not_print_the_password(url: str, code: int, tmp_path: Path) -> None:
    proc = _serve(url, tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, (out, err)
    assert "cannot open" in err and "S3CRET" not in out + err


@pytest.mark.postgres
def test_the_startup_line_does_not_print_the_password(tmp_path: Path) -> None:
    backend = _postgres(tmp_path)  # skips (or fails in CI) without PostgreSQL; makes a schema
    parts = urlsplit(PG_DSN)
    user, _, host = parts.netloc.rpartition("@")
    netloc = f"{user.split(':')[0] or getpass.getuser()}:S3CRET@{host}"
    sep = "&" if parts.query else ""
    url = urlunsplit(
        parts._replace(netloc=netloc, query=f"{parts.query}{sep}schema={backend._test_schema}")
    )
    proc = _serve(url, tmp_path)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("bunq serve: listening on tcp"), line
        assert "S3CRET" not in line and ":***@" in line
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        backend.close()
        _drop_pg_schema(backend)
    assert "S3CRET" not in err
