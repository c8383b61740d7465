"""A Worker in a process of its own, for the cross-process event tests.

``python events_proc.py URL QUEUE SECONDS``: runs a Worker on QUEUE for at most
SECONDS (or until stdin closes). The handler reports progress 50 and a log line,
then: ``{"fail": true}`` raises; ``{"hold": "ns"}`` waits until kv record
(ns, job id) exists (the test releases it after it saw the progress and the log line
while the job runs); else returns ``{"double": x * 2}``.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import bunq


def main() -> None:
    url, queue, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    backend = bunq.connect(url)

    def handle(job: Any, ctx: bunq.JobContext) -> Any:
        ctx.update_progress(50)
        ctx.log(f"working on {job.id}")
        data = job.data or {}
        if data.get("fail"):
            raise ValueError("asked to fail")
        if data.get("hold"):
            end = time.monotonic() + 30
            while backend.kv_get(data["hold"], job.id) is None and time.monotonic() < end:
                time.sleep(0.02)
        return {"double": data.get("x", 0) * 2}

    worker = bunq.Worker(queue, handle, backend, lease_ms=5000, idle_wait_ms=100).start()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print("ready", flush=True)
    stop.wait(seconds)
    worker.close()
    backend.close()


if __name__ == "__main__":
    main()
