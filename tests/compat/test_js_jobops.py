"""bunqueue's JS client drives per-job operations against ``bunq serve``."""

from __future__ import annotations

from typing import Any

from compat.test_js_client import run_js


def test_js_client_promote_change_priority_retry_completed(compat_server: Any) -> None:
    out = run_js(compat_server.port, script="jobops.mjs")
    assert (out["delayed"], out["promoted"]) == ("delayed", "waiting")
    assert out["promotedMany"] == 1 and out["later2"] == "waiting"
    assert out["parked"] == "delayed" and out["gone"] is None
    assert out["perPriority"] == {"0": 4, "5": 1, "10": 1}
    # the reprioritised job runs first, then priority 5, then the rest in admission order
    assert out["order"] == ["low", "high", "later", "later2", "edited"], out["order"]
    assert out["editedData"] == 50
    assert out["countsDone"]["completed"] == 5 and out["countsDone"]["delayed"] == 1
    assert out["lowAfterRetry"] == "waiting"
    assert out["countsRetried"]["waiting"] == 5 and out["countsRetried"]["completed"] == 0
    assert out["secondRun"] == 5 and out["countsFinal"]["completed"] == 5
