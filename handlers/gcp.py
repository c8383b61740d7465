"""Google Cloud entry points: Cloud Functions / Cloud Run services, and Cloud Run jobs.

``tick_http(request)``: an HTTP function (Cloud Scheduler HTTP target). The
JSON body (or a dict) is a :class:`TickEvent`; the platform does not say how
much time is left, so ``budget_ms`` (default 55 s, under the default 60 s
timeout) bounds the tick. Returns a :class:`TickResponse` (Flask sends it as
JSON) and logs one JSON line with ``severity``.

``tick_event(cloud_event)``: a CloudEvent function (Cloud Scheduler -> Pub/Sub
-> Eventarc): the Pub/Sub message's data (base64 JSON) is the TickEvent.

``main()``: a Cloud Run job's command: ``bunq tick`` with its exit codes
(arguments after the program name are passed on).

The runtime is built on the first request; importing connects to nothing.
"""

from __future__ import annotations

import base64
import functools
import json
import sys
from collections.abc import Mapping
from typing import Any

from handlers._common import Runtime, TickEvent, TickResponse, run_tick, tick_options

DEFAULT_BUDGET_MS = 55_000

__all__ = ["main", "runtime", "tick_event", "tick_http", "TickEvent", "TickResponse"]


@functools.cache
def runtime() -> Runtime:
    """The instance's runtime, built once (clear with ``runtime.cache_clear()``)."""
    return Runtime.from_env()


def _tick(event: object) -> TickResponse:
    rt = runtime()
    opts = tick_options(event, rt.settings)
    return run_tick(rt, opts, opts.budget_ms or DEFAULT_BUDGET_MS)


def tick_http(request: Any) -> TickResponse:
    """Tick with the options in a Flask request's JSON body (or a dict)."""
    if isinstance(request, Mapping):
        return _tick(request)
    if not callable(getattr(request, "get_json", None)):
        raise ValueError("tick_http takes a Flask request or a dict of tick options")
    return _tick(request.get_json(silent=True) or {})


def tick_event(cloud_event: Any) -> TickResponse:
    """Tick with the options carried by a Pub/Sub CloudEvent (or a plain dict event)."""
    data = getattr(cloud_event, "data", None)
    if data is None and isinstance(cloud_event, Mapping):
        data = cloud_event.get("data", cloud_event)
    message = data.get("message") if isinstance(data, Mapping) else None
    if isinstance(message, Mapping):
        try:
            raw = base64.b64decode(message.get("data") or b"e30=")  # e30= is "{}"
            data = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"Pub/Sub message data must be base64 JSON tick options: {exc}") \
                from None  # fmt: skip
    return _tick(data)


def main(argv: list[str] | None = None) -> int:
    """Run ``bunq tick`` (queue, handler and backend from BUNQ_* unless given)."""
    from bunq.cli import main as cli

    return cli(["tick", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
