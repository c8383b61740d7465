"""``bunq demo --live``: add and process jobs continuously until Ctrl-C (to watch a dashboard).

Every half second it adds a few ``square`` jobs (about ``--rate`` a second) to
queue ``demo`` and processes what is due with :func:`bunq.tick`: each job logs
a line and reports progress; one in 20 fails once and is retried, one in 50
fails for good and lands in the dead-letter queue.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import random
import signal
import time
from typing import Any

from ..backends.base import Backend
from ..errors import Retry
from ..job import Job
from ..queue import Queue
from ..tick import tick
from .exits import EXIT_OK
from .output import out


def run(args: argparse.Namespace, be: Backend, q: Queue) -> int:
    stop = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    logging.getLogger("bunq.jobs").setLevel(logging.CRITICAL)  # the dashboard shows failures
    rng = random.Random(7)
    seq = itertools.count()
    done = failed = 0

    def work(job: Job) -> int:
        be.add_log(job.id, f"squaring {job.data}")
        be.update_progress(job.id, 50)
        if job.data % 50 == 0:
            raise RuntimeError(f"{job.data} is unlucky: dead-lettered")
        if job.data % 20 == 0 and job.attempts == 1:
            raise Retry("every 20th job fails once", delay_ms=2000)
        be.update_progress(job.id, 100)
        return int(job.data) ** 2

    if not args.json:
        print("bunq demo --live: adding and processing jobs on queue 'demo'; Ctrl-C stops")
    while not stop:
        n = max(1, round(args.rate / 2 * rng.uniform(0.5, 1.5)))
        q.add_bulk([{"name": "square", "data": next(seq), "opts": {"attempts": 2}}
                    for _ in range(n)])  # fmt: skip
        r = tick("demo", work, be, max=n + 20)
        done += r.succeeded
        failed += r.failed
        time.sleep(0.5)
    out(args, {"succeeded": done, "failed": failed},
        f"bunq demo: stopped after {done} jobs ({failed} failed attempts)")  # fmt: skip
    return EXIT_OK
