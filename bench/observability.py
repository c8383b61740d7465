"""What metrics, tracing and webhooks cost per job; prints JSON.

    python bench/observability.py [-n 20000] [--runs 5]

CPU per job (µs, median of ``--runs``; process time, robust on a shared machine) of
``tick(max=n)`` and of ``Queue.add`` over the memory engine, in three modes:
``off`` (the default: no registry asked for, OpenTelemetry not configured),
``metrics`` (``bunq.metrics.registry()`` turned on) and ``metrics+otel`` (an SDK
tracer provider whose processor drops every span, so only bunq's span work is
measured). Then the cost of one ``Dispatcher.dispatch`` call with one matching
webhook (queued, not sent: the sender thread is not started), and with none.
Modes run in one process, in that order (OpenTelemetry cannot be unset).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":  # run as a script: bench/ must not shadow packages (bench/redis.py)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "bench")]
sys.path.insert(0, ROOT)

import bunq.metrics  # noqa: E402
from bunq import Queue, connect, tick  # noqa: E402
from bunq.webhooks import Dispatcher, Webhooks  # noqa: E402

PAYLOAD = {"user": 12345, "email": "someone@example.com", "template": "welcome-v2", "pad": "x" * 40}


def adds(n: int) -> float:
    be = connect("memory://")
    q = Queue("a", be)
    c0 = time.process_time()
    for _ in range(n):
        q.add("job", PAYLOAD)
    c = time.process_time() - c0
    be.close()
    return c / n * 1e6


def ticks(n: int) -> float:
    be = connect("memory://")
    q = Queue("t", be, metrics=False)
    for _ in range(n // 1000):
        q.add_bulk([("job", PAYLOAD)] * 1000)
    c0 = time.process_time()
    r = tick("t", lambda job: None, be, max=n)
    c = time.process_time() - c0
    assert r.succeeded == n, r
    be.close()
    return c / n * 1e6


def dispatch(n: int, matching: bool) -> float:
    be = connect("memory://")
    hooks = Webhooks(be)
    hooks.add("https://example.com/hook", ["job.completed"], queue="q" if matching else "other")
    d = Dispatcher(hooks, max_pending=1000)
    c0 = time.process_time()
    for i in range(n):
        d.dispatch("completed", "q", {"jobId": str(i), "data": None})
    c = time.process_time() - c0
    d.close()
    be.close()
    return c / n * 1e6


def median(fn: Any, runs: int, *args: Any) -> float:
    return round(statistics.median(fn(*args) for _ in range(runs)), 2)


def otel_on() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())  # no processor: spans are built, then dropped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    out: dict[str, Any] = {"jobs": args.n, "runs": args.runs, "load_1m": os.getloadavg()[0]}
    modes: list[tuple[str, Any]] = [("off", None), ("metrics", bunq.metrics.registry)]
    try:
        import opentelemetry.sdk  # noqa: F401

        modes.append(("metrics+otel", otel_on))
    except ImportError:
        out["otel"] = "not installed (pip install 'bunq-queue[otel]')"
    for mode, turn_on in modes:
        if turn_on is not None:
            turn_on()
        out[mode] = {"tick_cpu_us_per_job": median(ticks, args.runs, args.n),
                     "add_cpu_us_per_job": median(adds, args.runs, args.n // 4)}  # fmt: skip
    one, none = (median(dispatch, args.runs, args.n, m) for m in (True, False))
    out["dispatch_cpu_us"] = {"one_matching_webhook": one, "no_matching_webhook": none}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
