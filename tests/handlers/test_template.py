"""template.yaml (AWS SAM): linted and translated offline (deploy/: tests/deploy).

cfn-lint must run in CI (it is in the test extra); locally the test skips only
when cfn-lint is missing and CI is unset. ``sam validate --lint`` and
``kubernetes-validate`` run when installed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from conftest import required_tool as tool

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
AWS_ENV = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SAM_CLI_TELEMETRY": "0"}


def test_cfn_lint_passes_with_informational_checks() -> None:
    out = subprocess.run([tool("cfn-lint"), "--include-checks", "I", "--", str(TEMPLATE)],
                         capture_output=True, text=True, env=AWS_ENV, check=False)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def test_sam_validate_lint_passes() -> None:
    sam = tool("sam", "aws-sam-cli")
    out = subprocess.run([sam, "validate", "--lint", "-t", str(TEMPLATE)], capture_output=True,
                         text=True, env=AWS_ENV, check=False)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def translate() -> dict[str, Any]:
    """Run the SAM transform offline, as cfn-lint does (no AWS calls)."""
    tool("cfn-lint")
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    class Policies:
        def load(self) -> dict[str, str]:
            arn = "arn:aws:iam::aws:policy/service-role/"
            return {
                "AWSLambdaBasicExecutionRole": arn + "AWSLambdaBasicExecutionRole",
                "AWSLambdaSQSQueueExecutionRole": arn + "AWSLambdaSQSQueueExecutionRole",
                "AWSLambdaVPCAccessExecutionRole": arn + "AWSLambdaVPCAccessExecutionRole",
            }

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    tpl = yaml_parse(TEMPLATE.read_text())
    tpl["Globals"]["Function"]["CodeUri"] = "s3://bucket/bunq.zip"
    out: dict[str, Any] = transform(tpl, {}, Policies())
    return out


def of_type(cfn: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in cfn["Resources"].values() if r["Type"] == kind]


def test_the_schedule_does_not_retry_stale_ticks() -> None:
    cfn = translate()
    [schedule] = of_type(cfn, "AWS::Scheduler::Schedule")
    props = schedule["Properties"]
    assert "Name" not in props  # OmitName: two stacks in one account do not collide
    assert props["Target"]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    [invoke] = of_type(cfn, "AWS::Lambda::EventInvokeConfig")
    assert invoke["Properties"]["MaximumRetryAttempts"] == 0
    fn = cfn["Resources"]["TickFunction"]["Properties"]
    assert fn["Handler"] == "handlers.aws_lambda.handler"
    # The backend URL (with its password) is read from Secrets Manager, not the environment.
    assert set(fn["Environment"]["Variables"]) == {"BUNQ_BACKEND_SECRET", "BUNQ_HANDLER",
                                                   "BUNQ_QUEUE"}  # fmt: skip
    assert "Fn::If" in fn["ReservedConcurrentExecutions"]  # a parameter, 0 = none reserved


def test_functions_are_traced_logged_with_retention_and_alarmed() -> None:
    cfn = translate()
    fns = of_type(cfn, "AWS::Lambda::Function")
    assert fns and all(f["Properties"]["TracingConfig"]["Mode"] == "Active" for f in fns)
    tick = cfn["Resources"]["TickFunction"]["Properties"]
    assert tick["LoggingConfig"]["LogGroup"] == {"Ref": "TickLogGroup"}
    group = cfn["Resources"]["TickLogGroup"]["Properties"]
    assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    alarms = {(a["Properties"]["Namespace"], a["Properties"]["MetricName"])
              for a in of_type(cfn, "AWS::CloudWatch::Alarm")}  # fmt: skip
    assert {("bunq", "unsettled"), ("bunq", "moved_to_dlq"), ("AWS/Lambda", "Errors"),
            ("AWS/SQS", "ApproximateNumberOfMessagesVisible")} <= alarms  # fmt: skip
    from handlers._common import EMF_METRICS  # the alarms watch metrics the tick emits

    assert {"unsettled", "moved_to_dlq"} <= {name for name, _ in EMF_METRICS}
    for name in ("JobsQueue", "JobsDeadLetterQueue"):
        q = cfn["Resources"][name]
        assert (q["DeletionPolicy"], q["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_the_tick_timeout_is_shorter_than_its_schedule_period() -> None:
    tpl = yaml_template()
    period = tpl["Parameters"]["TickSchedule"]["Default"]
    assert period == "rate(1 minute)"
    assert tpl["Parameters"]["TickTimeout"]["Default"] < 60


def yaml_template() -> dict[str, Any]:
    from samtranslator.yaml_helper import yaml_parse

    tpl: dict[str, Any] = yaml_parse(TEMPLATE.read_text())
    return tpl


def test_the_sqs_variant_reports_partial_failures() -> None:
    cfn = translate()
    [mapping] = of_type(cfn, "AWS::Lambda::EventSourceMapping")
    assert mapping["Condition"] == "WithSqs"
    assert mapping["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    queue = cfn["Resources"]["JobsQueue"]
    fn = cfn["Resources"]["SqsJobsFunction"]["Properties"]
    assert queue["Properties"]["VisibilityTimeout"] >= 6 * fn["Timeout"]
    assert queue["Properties"]["RedrivePolicy"]["maxReceiveCount"] <= 1000
    assert fn["Handler"] == "handlers.aws_lambda.sqs_handler"
