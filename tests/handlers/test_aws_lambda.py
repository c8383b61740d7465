"""handlers.aws_lambda: scheduled tick and SQS batch handlers, with real-shaped events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bunq.errors import ConfigError
from bunq.queue import Queue
from handlers import aws_lambda

ROOT = Path(__file__).resolve().parents[2]


def last_log(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def test_scheduler_event_drains_the_queue(env: Any, event: Any, lambda_context: Any,
                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    with Queue("emails", env["url"]) as q:
        q.add_bulk([("send", {"to": f"u{i}@example.org"}) for i in range(120)])
        q.add("send", {"to": "fail@example.org"}, attempts=1)
    out = aws_lambda.handler(event("scheduler_input"), lambda_context())
    assert (out["queue"], out["leased"], out["succeeded"], out["failed"]) == ("emails", 121, 120, 1)
    assert (out["moved_to_dlq"], out["may_have_more"], out["queue_depth"]) == (1, False, 0)
    assert out["ticks"] == 3  # max 50 per tick, looping while each tick fills its batch
    line = last_log(capsys)
    assert (line["level"], line["message"], line["succeeded"]) == ("INFO", "bunq tick", 120)
    assert line["scheduled_time"] == "2026-11-29T18:00:00Z" and line["request_id"]
    json.dumps(out)  # the response is JSON-serialisable


def test_eventbridge_rule_envelope_uses_the_env_queue(env: Any, event: Any,
                                                      lambda_context: Any) -> None:  # fmt: skip
    with Queue("emails", env["url"]) as q:
        q.add("send", {"to": "a@example.org"})
    out = aws_lambda.handler(event("eventbridge_scheduled"), lambda_context())
    assert (out["queue"], out["succeeded"]) == ("emails", 1)


def test_deadline_comes_from_the_remaining_time(env: Any, lambda_context: Any) -> None:
    with Queue("emails", env["url"]) as q:
        q.add_bulk([("send", {"to": "x", "sleep": 0.05}) for _ in range(40)])
    out = aws_lambda.handler({"safety_ms": 100}, lambda_context(remaining_ms=400))
    assert out["stopped"] == "deadline" and out["may_have_more"]
    assert 1 <= out["succeeded"] <= 7
    out = aws_lambda.handler({}, lambda_context(remaining_ms=2000))  # below the 3 s margin
    assert (out["leased"], out["stopped"], out["may_have_more"]) == (0, "deadline", True)


@pytest.mark.parametrize("bad, words", [
    ([], "JSON object"), ({"maxx": 5}, "unknown tick event keys ['maxx']"),
    ({"max": "10"}, "'max' must be a positive integer"), ({"loop": "yes"}, "true or false"),
    ({"queue": "no spaces"}, "invalid queue name"),
])  # fmt: skip
def test_bad_events_fail_fast_with_an_actionable_value_error(
        env: Any, lambda_context: Any, bad: Any, words: str) -> None:  # fmt: skip
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        aws_lambda.handler(bad, lambda_context())


def test_no_queue_anywhere(env: Any, lambda_context: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BUNQ_QUEUE")
    aws_lambda.runtime.cache_clear()
    with pytest.raises(ValueError, match="BUNQ_QUEUE"):
        aws_lambda.handler({}, lambda_context())


def test_missing_handler_setting_names_the_variable(
        env: Any, lambda_context: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.delenv("BUNQ_HANDLER")
    with pytest.raises(ConfigError, match="BUNQ_HANDLER"):
        aws_lambda.handler({}, lambda_context())


def test_runtime_is_built_once_per_container(env: Any, lambda_context: Any) -> None:
    aws_lambda.handler({}, lambda_context())
    first = aws_lambda.runtime()
    aws_lambda.handler({}, lambda_context())
    assert aws_lambda.runtime() is first and aws_lambda.runtime.cache_info().hits >= 2


def test_sqs_batch_reports_exactly_the_failed_records(
        env: Any, event: Any, lambda_context: Any,
        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    out = aws_lambda.sqs_handler(event("sqs_batch"), lambda_context())
    assert out == {"batchItemFailures": [
        {"itemIdentifier": "2e1424d4-f796-459a-8184-9c92662be6da"},
        {"itemIdentifier": "d9144555-9a4f-4ec3-99a0-34ce359b4b54"},
    ]}  # fmt: skip
    jobs = sys.modules[env["module"]].calls
    assert [(j.queue, j.attempts, j.opts.attempts) for j in jobs] == [
        ("emails", 1, 3),
        ("emails", 3, 5),
    ]
    assert not env["db"].exists()  # the SQS path never opened the backend
    line = last_log(capsys)
    assert line["failed"] == 2
    [directive] = line["_aws"]["CloudWatchMetrics"]  # the batch line carries EMF metrics
    names = {m["Name"] for m in directive["Metrics"]}
    assert {"unsettled", "moved_to_dlq", "duration_ms", "job_duration_ms"} <= names
    assert names <= set(line) and line["queue"] == "emails"
    # three records, two jobs run (one fails); SQS is not reachable here, so the failure
    # and the record that is not a job are never settled: unsettled, reported back
    assert (line["records"], line["ran"], line["succeeded"], line["jobs_failed"],
            line["unsettled"]) == (3, 2, 1, 1, 2)  # fmt: skip
    assert line["level"] == "ERROR" and len(line["job_duration_ms"]) == 2


def test_sqs_handler_refuses_other_events(env: Any, event: Any, lambda_context: Any) -> None:
    with pytest.raises(ValueError, match="not an SQS event"):
        aws_lambda.sqs_handler(event("scheduler_input"), lambda_context())


def test_importing_the_handlers_connects_to_nothing(tmp_path: Path) -> None:
    code = (
        "import sys, handlers.aws_lambda, handlers.gcp; "
        "print(sorted(m for m in ('apsw', 'psycopg', 'boto3') if m in sys.modules))"
    )
    env = {
        **os.environ,
        "BUNQ_BACKEND": f"sqlite:///{tmp_path}/never.db",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == "[]"
    assert not (tmp_path / "never.db").exists()


def test_the_tick_line_carries_cloudwatch_metrics(
        env: Any, lambda_context: Any, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    with Queue("emails", env["url"]) as q:
        q.add("send", {"to": "fail@example.org"}, attempts=1)
    aws_lambda.handler({}, lambda_context())
    line = last_log(capsys)
    [directive] = line["_aws"]["CloudWatchMetrics"]
    names = {m["Name"] for m in directive["Metrics"]}
    assert directive["Namespace"] == "bunq" and directive["Dimensions"] == [["queue"]]
    assert {"unsettled", "moved_to_dlq", "failed", "duration_ms"} <= names
    assert all(isinstance(line[n], int) for n in names) and line["moved_to_dlq"] == 1
    assert line["queue"] == "emails" and isinstance(line["_aws"]["Timestamp"], int)


@pytest.mark.sqs
@pytest.mark.parametrize("kind", ["secretsmanager", "secretsmanager-json", "ssm"])
def test_the_backend_url_comes_from_a_secret_read_once(
        env: Any, lambda_context: Any, kind: str,
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """BUNQ_BACKEND_SECRET: Secrets Manager or SSM, read at the first invocation only."""
    import boto3
    from backends.sqs import moto_server

    endpoint = moto_server.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.delenv("BUNQ_BACKEND")
    name = f"bunq-{kind}-{os.getpid()}-{id(env):x}"
    if kind == "ssm":
        boto3.client("ssm").put_parameter(Name=f"/{name}", Value=env["url"], Type="SecureString")
        monkeypatch.setenv("BUNQ_BACKEND_SECRET", f"ssm:/{name}")
    else:
        value = json.dumps({"url": env["url"]}) if kind.endswith("json") else env["url"]
        arn = boto3.client("secretsmanager").create_secret(Name=name, SecretString=value)["ARN"]
        monkeypatch.setenv("BUNQ_BACKEND_SECRET", arn)
    with Queue("emails", env["url"]) as q:
        q.add_bulk([("send", {"to": "a@example.org"}) for _ in range(3)])
    assert aws_lambda.handler({}, lambda_context())["succeeded"] == 3
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # a second read would fail
    assert aws_lambda.handler({}, lambda_context())["leased"] == 0


@pytest.mark.sqs
def test_an_unreadable_secret_is_a_config_error_without_its_value(
        env: Any, lambda_context: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import boto3
    from backends.sqs import moto_server

    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.start())
    monkeypatch.delenv("BUNQ_BACKEND")
    monkeypatch.setenv("BUNQ_BACKEND_SECRET", "arn:aws:secretsmanager:us-east-1:1:secret:none")
    with pytest.raises(ConfigError, match="cannot read the backend URL"):
        aws_lambda.handler({}, lambda_context())
    aws_lambda.runtime.cache_clear()
    name = f"bunq-not-a-url-{os.getpid()}"
    arn = boto3.client("secretsmanager").create_secret(Name=name, SecretString="hunter2")["ARN"]
    monkeypatch.setenv("BUNQ_BACKEND_SECRET", arn)
    with pytest.raises(ConfigError, match="holds no backend URL") as info:
        aws_lambda.handler({}, lambda_context())
    assert "hunter2" not in str(info.value)
