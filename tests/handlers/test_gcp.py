"""handlers.gcp: HTTP and CloudEvent functions and the Cloud Run job entry point."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from bunq.queue import Queue
from handlers import gcp


class FakeRequest:
    """The part of a Flask request the HTTP function reads."""

    def __init__(self, body: Any) -> None:
        self.body = body

    def get_json(self, silent: bool = False) -> Any:
        return self.body


class FakeCloudEvent:
    def __init__(self, payload: dict[str, Any]) -> None:
        self.data = payload["data"]
        self.attrs = {k: v for k, v in payload.items() if k != "data"}


def test_http_function_with_a_flask_request_or_a_dict(env: Any) -> None:
    with Queue("emails", env["url"]) as q:
        q.add_bulk([("send", {"to": "a"}), ("send", {"to": "b"})])
    out = gcp.tick_http(FakeRequest({"max": 1}))
    assert (out["queue"], out["succeeded"], out["ticks"]) == ("emails", 2, 3)
    assert gcp.tick_http({"queue": "emails"})["leased"] == 0
    assert gcp.tick_http(FakeRequest(None))["queue"] == "emails"  # no body: all defaults


def test_http_function_budget_bounds_the_tick(env: Any) -> None:
    with Queue("emails", env["url"]) as q:
        q.add_bulk([("send", {"to": "x", "sleep": 0.05}) for _ in range(40)])
    out = gcp.tick_http({"budget_ms": 300, "safety_ms": 0})
    assert out["stopped"] == "deadline" and 1 <= out["succeeded"] <= 7


def test_pubsub_cloudevent(env: Any, event: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with Queue("emails", env["url"]) as q:
        q.add("send", {"to": "a"})
    out = gcp.tick_event(FakeCloudEvent(event("pubsub_cloudevent")))
    assert (out["queue"], out["succeeded"]) == ("emails", 1)
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["severity"] == "INFO"
    assert gcp.tick_event({"data": {"queue": "emails"}})["leased"] == 0  # a plain dict event


def test_pubsub_data_that_is_not_json(env: Any) -> None:
    bad = {"data": {"message": {"data": base64.b64encode(b"nope").decode()}}}
    with pytest.raises(ValueError, match="base64 JSON"):
        gcp.tick_event(bad)


def test_http_function_refuses_other_objects(env: Any) -> None:
    with pytest.raises(ValueError, match="Flask request"):
        gcp.tick_http(42)


def test_cloud_run_job_main_returns_the_cli_exit_code(env: Any) -> None:
    with Queue("emails", env["url"]) as q:
        q.add("send", {"to": "a"})
    assert gcp.main(["--json"]) == 0
    assert gcp.main(["--handler", "no_such_module:x"]) == 78
