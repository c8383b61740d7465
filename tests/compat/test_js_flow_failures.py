"""bunqueue's FlowProducer and Worker (npm ``bunqueue`` 2.9.5) drive flows with a failing
child against ``bunq serve``, one per failure policy (``tests/compat/js/flowfail.mjs``),
and the config and group commands its Queue exposes."""

from __future__ import annotations

from typing import Any

from compat.test_js_client import run_js


def test_js_flows_with_a_failing_child_under_each_policy(compat_server: Any) -> None:
    out = run_js(compat_server.port, script="flowfail.mjs")
    assert out["states"] == {
        "wait": "waiting-children",  # BullMQ's default: the parent keeps waiting
        "fail": "failed",
        "ignore": "completed",
        "remove": "completed",
        "continue": "completed",
    }
    ran = out["parents"]
    assert set(ran) == {"ignore", "remove", "continue"}
    assert ran["ignore"] == {"values": [{"v": 7}], "failed": [], "ignored": ["child broke"]}
    assert ran["remove"] == {"values": [], "failed": [], "ignored": []}
    assert ran["continue"] == {"values": [], "failed": ["child broke"], "ignored": []}
    assert out["dlqConfig"]["maxAutoRetries"] == 5 and out["dlqConfig"]["autoRetry"] is False
    assert out["groupConcurrency"] is None and out["groupPaused"] is False
    assert "PauseGroup is not supported" in out["pauseGroup"]
