"""Fixtures for the platform adapters: real-shaped events, a fake Lambda context, an env."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

EVENTS = Path(__file__).parent / "events"

JOBS_MODULE = """
import time

calls = []

def handle(job):
    calls.append(job)
    data = job.data if isinstance(job.data, dict) else {}
    time.sleep(data.get("sleep", 0))
    if "fail" in str(data.get("to", "")):
        raise ValueError("mailbox full")
    return {"sent": data.get("to")}
"""


class FakeLambdaContext:
    """The parts of the Lambda context a handler reads, on the real clock."""

    function_name = "bunq-tick"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bunq-tick"
    memory_limit_in_mb = 512
    aws_request_id = "6f1f4b4e-0c5f-4e4b-9a3f-1f2e3d4c5b6a"
    log_group_name = "/aws/lambda/bunq-tick"
    log_stream_name = "2026/11/29/[$LATEST]abcdef"

    def __init__(self, remaining_ms: int = 60_000) -> None:
        self._deadline = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(int((self._deadline - time.monotonic()) * 1000), 0)


@pytest.fixture
def lambda_context() -> Callable[..., FakeLambdaContext]:
    return FakeLambdaContext


@pytest.fixture
def event() -> Callable[[str], Any]:
    def load(name: str) -> Any:
        return json.loads((EVENTS / f"{name}.json").read_text())

    return load


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """BUNQ_* for a SQLite file in tmp_path and a handler module on sys.path."""
    from handlers import aws_lambda, gcp

    module = f"bunq_test_jobs_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(JOBS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    url = f"sqlite:///{tmp_path}/handlers.db"
    monkeypatch.setenv("BUNQ_BACKEND", url)
    monkeypatch.setenv("BUNQ_HANDLER", f"{module}:handle")
    monkeypatch.setenv("BUNQ_QUEUE", "emails")
    caches = (aws_lambda.runtime, gcp.runtime)
    for cache in caches:
        cache.cache_clear()
    yield {"url": url, "module": module, "db": tmp_path / "handlers.db"}
    for cache in caches:
        if cache.cache_info().currsize:
            rt = cache()
            if "backend" in rt.__dict__:
                rt.backend.close()
        cache.cache_clear()
