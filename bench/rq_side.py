"""RQ side of ``python bench/redis.py`` (run with a Python that has ``rq``; not a bunq
dependency: ``python -m venv /tmp/rq && /tmp/rq/bin/pip install rq``). One case per run:

    python bench/rq_side.py <case> <n> <redis-url>     case: add | bulk | process | w4

Prints one JSON line {case, n, per_s | p50_ms, p99_ms}. Same ~100-byte payload as bunq.
``process`` drains with a SimpleWorker (RQ runs one job at a time per worker, no fork).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]  # bench/redis.py
from redis import Redis  # noqa: E402
from rq import Queue, SimpleWorker  # noqa: E402

sys.path.append(HERE)  # RQ imports this module (rq_side.noop) by name

PAYLOAD = {"user": 12345, "email": "someone@example.com", "template": "welcome-v2",
           "pad": "x" * 40}  # fmt: skip
LATENCIES: list[float] = []


def noop(data: Any) -> None:
    return None


def record(data: Any) -> None:
    LATENCIES.append((time.time() - data["t"]) * 1000)


def produce(url: str, name: str, rate: int, seconds: int) -> None:
    import rq_side as me

    q = Queue(name, connection=Redis.from_url(url))
    start = time.perf_counter()
    for i in range(rate * seconds):
        while (delay := start + i / rate - time.perf_counter()) > 0:
            time.sleep(delay)
        q.enqueue(me.record, {**PAYLOAD, "t": time.time()})


def fill(q: Queue, n: int) -> None:
    import rq_side as me

    for i in range(0, n, 1000):
        q.enqueue_many([Queue.prepare_data(me.noop, (PAYLOAD,)) for _ in range(min(1000, n - i))])


def main() -> None:
    import rq_side as me  # RQ refuses functions of __main__: jobs name rq_side.noop

    kind, n, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if kind == "produce":
        produce(url, sys.argv[4], n, int(sys.argv[5]))
        return
    conn = Redis.from_url(url)
    q = Queue(f"bench-{kind}-{uuid.uuid4().hex[:6]}", connection=conn)
    out: dict[str, Any] = {"case": kind, "n": n}
    t = time.perf_counter()
    if kind == "add":
        for _ in range(n):
            q.enqueue(me.noop, PAYLOAD)
        out["per_s"] = round(n / (time.perf_counter() - t))
    elif kind == "bulk":
        fill(q, n)
        out["per_s"] = round(n / (time.perf_counter() - t))
    elif kind == "process":
        fill(q, n)
        t = time.perf_counter()
        SimpleWorker([q], connection=conn).work(burst=True, logging_level="WARNING")
        out["per_s"] = round(n / (time.perf_counter() - t))
    elif kind == "w4":
        # RQ cannot keep up with 1,000 jobs/s here: the worker stops 5 s after the producer
        # and the latencies are those of the jobs it ran; "backlog" counts the rest.
        rate, seconds = 1000, n
        prod = subprocess.Popen([sys.executable, __file__, "produce", str(rate), url, q.name,
                                 str(seconds)])  # fmt: skip
        worker = SimpleWorker([q], connection=conn)
        stop = threading.Timer(seconds + 5, lambda: setattr(worker, "_stop_requested", True))
        stop.start()
        worker.work(max_jobs=rate * seconds, logging_level="WARNING")
        stop.cancel()
        prod.wait()
        lat = sorted(me.LATENCIES)
        out.update(n=len(lat), p50_ms=round(lat[len(lat) // 2], 3),
                   p99_ms=round(lat[int(len(lat) * 0.99)], 3),
                   backlog=rate * seconds - len(lat))  # fmt: skip
    q.delete(delete_jobs=True)
    for key in conn.scan_iter(match=f"rq:*:{q.name}"):  # its registries (jobs expire)
        conn.delete(key)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
