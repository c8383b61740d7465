"""OpenTelemetry spans for adds and handler runs, one trace from producer to handler.

Optional (the ``otel`` extra: opentelemetry-api/sdk). Tracing is on when the
application has configured a tracer provider
(``opentelemetry.trace.set_tracer_provider(...)``, or :func:`use` for one of
bunq's own); until then bunq does not import OpenTelemetry and costs nothing.

- ``Queue.add`` / ``add_bulk`` open a ``PRODUCER`` span ``<queue> publish`` and
  store the W3C ``traceparent`` of that span in each job's options (unless the
  caller set one): every backend keeps it, and ``bunq://`` carries it in opts.
- Every driver's executor runs the handler inside a ``CONSUMER`` span
  ``<queue> process`` whose parent is the job's ``traceparent``: the handler's
  own spans join the producer's trace. An exception the handler raises is
  recorded on the span (status ERROR).

Attributes follow OpenTelemetry's messaging conventions: ``messaging.system``
(``bunq``), ``messaging.operation.type``, ``messaging.destination.name`` (the
queue), ``messaging.message.id``, plus ``bunq.job.name`` and ``bunq.job.attempt``.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .job import Job

SYSTEM = "bunq"
_provider: Any | None = None  # a provider chosen with use(); None: the global one


def use(provider: Any | None) -> None:
    """Trace with ``provider`` instead of OpenTelemetry's global one (None: the global)."""
    global _provider
    _provider = provider


def tracer() -> Any | None:
    """bunq's tracer when the application configured OpenTelemetry, else None."""
    if _provider is not None:
        return _provider.get_tracer("bunq")
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:  # nobody imported OpenTelemetry: it cannot be configured
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider.get_tracer("bunq")


def traceparent(span: Any) -> str | None:
    """The W3C traceparent of ``span`` (None when it is not recording a valid context)."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


@contextmanager
def publishing(queue: str, count: int) -> Iterator[tuple[Any, str | None]]:
    """A producer span around an add of ``count`` jobs: ``(span, traceparent)``, or
    ``(None, None)`` when tracing is off."""
    t = tracer()
    if t is None:
        yield None, None
        return
    from opentelemetry.trace import SpanKind

    attrs = {"messaging.system": SYSTEM, "messaging.operation.type": "publish",
             "messaging.destination.name": queue,
             "messaging.batch.message_count": count}  # fmt: skip
    with t.start_as_current_span(f"{queue} publish", kind=SpanKind.PRODUCER,
                                 attributes=attrs) as span:  # fmt: skip
        yield span, traceparent(span)


def traced(handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler`` run inside a consumer span per job (itself when tracing is off).

    The wrapper keeps the handler's signature (``functools.wraps``) and kind
    (a coroutine function stays one), and passes every argument through.
    """
    t = tracer()
    if t is None:
        return handler
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - callable objects
    ):

        async def run_async(job: Job, *args: Any, **kw: Any) -> Any:
            with _processing(t, job):
                return await handler(job, *args, **kw)

        return functools.wraps(handler)(run_async)

    def run(job: Job, *args: Any, **kw: Any) -> Any:
        with _processing(t, job):
            return handler(job, *args, **kw)

    return functools.wraps(handler)(run)


@contextmanager
def _processing(t: Any, job: Job) -> Iterator[Any]:
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent = None
    if job.opts.traceparent is not None:
        parent = TraceContextTextMapPropagator().extract({"traceparent": job.opts.traceparent})
    attrs = {"messaging.system": SYSTEM, "messaging.operation.type": "process",
             "messaging.destination.name": job.queue, "messaging.message.id": job.id,
             "bunq.job.name": job.name, "bunq.job.attempt": job.attempts}  # fmt: skip
    with t.start_as_current_span(f"{job.queue} process", context=parent, kind=SpanKind.CONSUMER,
                                 attributes=attrs) as span:  # fmt: skip
        yield span
