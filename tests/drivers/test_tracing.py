"""OpenTelemetry: one trace from Queue.add to the handler, carried in the job's
``traceparent`` option by every backend (and by ``bunq://``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

import bunq.tracing
from bunq import Queue, Worker, tick
from bunq.errors import ValidationError

PROVIDER = TracerProvider()
EXPORTER = InMemorySpanExporter()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
APP = PROVIDER.get_tracer("app")  # the application's own spans


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """bunq traces to PROVIDER during the test only (the global provider stays unset,
    so later tests run untraced)."""
    bunq.tracing.use(PROVIDER)
    EXPORTER.clear()
    yield EXPORTER
    bunq.tracing.use(None)
    EXPORTER.clear()


def work(job: Any) -> Any:
    with APP.start_as_current_span("work"):
        if job.data == "boom":
            raise ValueError("boom")
        return job.data


def by_name(exporter: InMemorySpanExporter) -> dict[str, Any]:
    return {s.name: s for s in exporter.get_finished_spans()}


def assert_one_trace(got: dict[str, Any], queue: str) -> None:
    request, publish = got["request"], got[f"{queue} publish"]
    process, inner = got[f"{queue} process"], got["work"]
    assert {s.context.trace_id for s in (request, publish, process, inner)} == {
        request.context.trace_id}  # fmt: skip
    assert publish.parent.span_id == request.context.span_id
    assert process.parent.span_id == publish.context.span_id  # from the job's traceparent
    assert inner.parent.span_id == process.context.span_id  # the handler's own span
    assert (publish.kind, process.kind) == (SpanKind.PRODUCER, SpanKind.CONSUMER)
    assert process.attributes["messaging.destination.name"] == queue
    assert process.attributes["messaging.message.id"] == publish.attributes["messaging.message.id"]


@pytest.mark.parametrize("kind", ["memory", "sqlite", "remote"])
def test_one_trace_from_add_to_the_handler_of_a_tick(
        make_backend: Any, kind: str, spans: InMemorySpanExporter) -> None:  # fmt: skip
    be = make_backend(kind)
    with APP.start_as_current_span("request"):
        job = Queue("traced", be).add("j", {"n": 1})
    assert job.opts.traceparent is not None
    assert tick("traced", work, be).succeeded == 1
    assert_one_trace(by_name(spans), "traced")


def test_a_worker_runs_a_coroutine_handler_in_the_trace(
        make_backend: Any, spans: InMemorySpanExporter) -> None:  # fmt: skip
    be = make_backend("sqlite")

    async def handler(job: Any) -> Any:
        await asyncio.sleep(0)
        return work(job)

    with APP.start_as_current_span("request"):
        Queue("aw", be).add_bulk([("j", 1)])
    w = Worker("aw", handler, be, concurrency=2).start()
    try:
        end = time.monotonic() + 10
        while "work" not in by_name(spans) and time.monotonic() < end:
            time.sleep(0.02)
    finally:
        w.close()
    assert_one_trace(by_name(spans), "aw")


def test_a_failing_handler_marks_its_span(make_backend: Any, spans: InMemorySpanExporter) -> None:
    be = make_backend("memory")
    Queue("f", be).add("j", "boom", attempts=1)
    assert tick("f", work, be).moved_to_dlq == 1
    process = by_name(spans)["f process"]
    assert process.status.status_code is StatusCode.ERROR
    assert process.parent is not None  # the add's span (no caller span: a trace of its own)


TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres", "redis", "sqs", "remote"])
def test_every_backend_keeps_the_traceparent(make_backend: Any, kind: str) -> None:
    be = make_backend(kind)
    Queue("tp", be, metrics=False).add("j", 1, traceparent=TP)
    [lease] = be.lease("tp", 1, 30_000, "me")
    assert lease.job.opts.traceparent == TP


@pytest.mark.parametrize("bad", ["", "00-xyz", TP.upper(), "ff" + TP[2:], 42, TP + "-00"])
def test_a_bad_traceparent_is_a_validation_error(make_backend: Any, bad: Any) -> None:
    with pytest.raises(ValidationError) as err:
        Queue("tp", make_backend("memory")).add("j", 1, traceparent=bad)
    assert err.value.data.get("field") == "traceparent"
