"""bunqueue's JS client (npm ``bunqueue`` 2.9.5, on bun 1.4.5) against ``bunq serve``.

It only runs on bun (its package sends node to a stub), so the test runs
``tests/compat/js/compat.mjs`` with the bun binary that ``npm ci`` installs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from compat.conftest import TOKEN, missing

JS = Path(__file__).parent / "js"
BUN = JS / "node_modules" / ".bin" / "bun"


def run_js(port: int, token: str | None = None, script: str = "compat.mjs") -> dict[str, Any]:
    if not BUN.exists() or not (JS / "node_modules" / "bunqueue").exists():
        missing("bun + bunqueue (npm ci in tests/compat/js)")
    cmd = [str(BUN), script, str(port)] + ([token] if token else [])
    done = subprocess.run(cmd, cwd=JS, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def check(out: dict[str, Any]) -> None:
    assert out["ids"]["bulk"] == 50
    assert out["countsBefore"]["waiting"] == 53 and out["countBefore"] == 53
    after = out["countsAfter"]
    assert after["completed"] == 52 and after["failed"] == 1, after
    assert after["waiting"] == after["active"] == 0
    assert out["seen"] == 53
    # the slow job outlived its 600 ms lock only through heartbeats: one attempt
    assert out["slow"] == {"state": "completed", "attempts": 1, "returnvalue": {"double": 0}}
    assert out["firstRunAttemptsMade"] == 0  # attempts made before this run, as bunqueue counts
    assert out["first"] == {"name": "first", "returnvalue": {"double": 0}}
    assert out["badState"] == "failed" and out["missing"] is None


def test_js_client_push_pull_ack_fail_heartbeat_counts(compat_server: Any) -> None:
    check(run_js(compat_server.port))


def test_js_client_with_auth_token(auth_server: Any) -> None:
    check(run_js(auth_server.port, TOKEN))
