"""SQS backend: tick() throughput and API calls per job against moto's server.

Standalone; prints one JSON document. Starts ``moto.server.ThreadedMotoServer``
on 127.0.0.1 (a free port, fake credentials), fills a queue with
``add_bulk`` (SendMessageBatch, 10 per call), then drains it with
``tick(max=...)`` until empty, counting every SQS API call with a botocore
``before-call`` hook. The figure that carries over to AWS is **API calls per
job** (what SQS bills and what latency multiplies); jobs/s measures bunq plus
moto on loopback, not AWS.

moto 5.2's receive path costs O(queue length) per message; ``--raw-moto``
keeps it, the default applies the same two answer-preserving speed-ups as
the test suite (tests/backends/sqs/conftest.py) so the bench measures bunq
rather than moto's scans.

    python bench/sqs.py --jobs 2000 --max 100 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import time
import uuid
from collections import Counter
from typing import Any


def speed_up_moto() -> None:
    import moto.sqs.models as models

    slow = getattr(models, "unix_time")  # noqa: B009 - not in moto's exports

    def unix_time(dt: Any = None) -> float:
        return time.time() if dt is None else float(slow(dt))

    def retention_ok(self: Any, queue_name: str, message: Any) -> bool:
        period = int(self.get_queue(queue_name).message_retention_period)
        return bool(period + message.sent_timestamp / 1000 > time.time())

    setattr(models, "unix_time", unix_time)  # noqa: B010 - patching the module moto reads
    setattr(models, "unix_time_millis", lambda dt=None: unix_time(dt) * 1000.0)  # noqa: B010
    setattr(models.SQSBackend, "is_message_valid_based_on_retention_period", retention_ok)  # noqa: B010


def run_once(endpoint: str, jobs: int, max_jobs: int, concurrency: int) -> dict[str, Any]:
    from bunq import Queue
    from bunq.backends import connect
    from bunq.tick import tick

    prefix = f"b{uuid.uuid4().hex[:8]}-"
    backend = connect(f"sqs://?endpoint={endpoint}&region=us-east-1&prefix={prefix}&create=1")
    calls: Counter[str] = Counter()
    backend.api.client.meta.events.register(  # type: ignore[attr-defined]
        "before-call.sqs", lambda model, **_: calls.update([model.name])
    )
    try:
        q = Queue("bench", backend)
        backend.counts("bench")  # create the queue and its DLQ outside the timings
        calls.clear()
        t0 = time.perf_counter()
        for start in range(0, jobs, 500):
            q.add_bulk([("job", {"i": i}) for i in range(start, min(start + 500, jobs))])
        add_s = time.perf_counter() - t0
        add_calls = sum(calls.values())
        calls.clear()
        done, ticks, t0 = 0, 0, time.perf_counter()
        while True:
            r = tick("bench", lambda job: None, backend, max=max_jobs, concurrency=concurrency)
            done, ticks = done + r.succeeded, ticks + 1
            if r.leased == 0:
                break
        tick_s = time.perf_counter() - t0
    finally:
        backend.close()
    tick_calls = sum(calls.values())
    assert done == jobs, (done, jobs)
    return {
        "add_jobs_per_s": round(jobs / add_s),
        "add_calls_per_job": round(add_calls / jobs, 3),
        "tick_jobs_per_s": round(jobs / tick_s),
        "ticks": ticks,
        "tick_calls_per_job": round(tick_calls / jobs, 3),
        "tick_calls_per_tick": round(tick_calls / ticks, 1),
        "tick_calls": dict(sorted(calls.items())),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--max", type=int, default=100, help="tick(max=...)")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--raw-moto", action="store_true", help="moto as shipped (slow scans)")
    args = ap.parse_args()
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from moto import __version__ as moto_version
    from moto.server import ThreadedMotoServer

    if not args.raw_moto:
        speed_up_moto()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        runs = [
            run_once(f"http://{host}:{port}", args.jobs, args.max, args.concurrency)
            for _ in range(args.repeat)
        ]
    finally:
        server.stop()
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "tick_calls"}
    print(
        json.dumps(
            {
                "bench": "sqs",
                "python": platform.python_version(),
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
                "moto": moto_version,
                "moto_speedups": not args.raw_moto,
                "jobs": args.jobs,
                "max": args.max,
                "concurrency": args.concurrency,
                "repeat": args.repeat,
                "median": median,
                "runs": runs,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
