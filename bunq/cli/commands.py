"""The ``bunq`` subcommands: each takes the parsed arguments and an open backend."""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from functools import partial
from typing import IO, Any

from ..backends.base import Backend
from ..errors import BunqError, ConfigError, Retry, ValidationError
from ..job import Job, JobState
from ..metrics import JobMetrics
from ..queue import Queue
from ..stacks import split
from ..tick import TickResult, load_handler, tick
from .backend import DEMO_BACKEND
from .exits import EX_TEMPFAIL, EXIT_OK, EXIT_SIGTERM
from .output import Progress, count, out, parse_json, when

BULK_BATCH = 1000
STATES = [s.value for s in JobState]


def _handler(args: argparse.Namespace) -> Any:
    """Import --handler (or BUNQ_HANDLER) with the current directory importable."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return load_handler(args.handler or args.settings.handler)


def _queue(args: argparse.Namespace) -> str:
    queue = args.queue or args.settings.queue
    if not queue:
        raise ConfigError(f"no queue: give it (bunq {args.command} QUEUE) or set BUNQ_QUEUE")
    return str(queue)


def _depth(be: Backend, queue: str) -> int:
    counts = be.counts(queue)
    return counts.get(JobState.WAITING, 0) + counts.get(JobState.DELAYED, 0)


def cmd_tick(args: argparse.Namespace, be: Backend) -> int:
    queue, handler = _queue(args), _handler(args)
    got: list[int] = []
    prog = Progress()

    def progress(r: TickResult) -> None:
        def line() -> str:
            rate = (r.succeeded + r.failed) / prog.elapsed()
            depth = _depth(be, queue)
            eta = f", about {depth / rate:,.0f} s to go" if rate > 0 else ""
            return (
                f"bunq tick: {queue}: {r.succeeded:,} succeeded, {r.failed:,} failed in "
                f"{prog.elapsed():,.0f} s ({rate:,.0f} jobs/s); {depth:,} waiting{eta}"
            )

        prog.update(line)  # fmt: skip

    old = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    export = bool(args.metrics_textfile or args.pushgateway)
    metrics = JobMetrics() if export else None
    try:
        deadline = None if args.deadline is None else int(args.deadline * 1000)
        r = tick(queue, handler, be, max=args.max, lease_ms=args.lease_ms or args.settings.lease_ms,
                 concurrency=args.concurrency, deadline_ms=deadline, stop=lambda: bool(got),
                 loop_while_more=args.loop_while_more, progress=progress,
                 metrics=metrics)  # fmt: skip
    finally:
        signal.signal(signal.SIGTERM, old)
        prog.done()
        if metrics is not None:
            _export_metrics(args, metrics, queue)
    out(args, {"queue": queue, **r.to_dict()},
        f"{queue}: leased {r.leased}, succeeded {r.succeeded}, failed {r.failed} "
        f"({r.moved_to_dlq} to DLQ), stale {r.stale}, unsettled {r.unsettled}, "
        f"released {r.released}; stopped: {r.stopped}; depth {r.queue_depth}; "
        f"{r.duration_ms} ms")  # fmt: skip
    if r.unsettled:
        print(f"bunq: {count(r.unsettled, 'outcome')} not recorded; those jobs will run again",
              file=sys.stderr)  # fmt: skip
        return EX_TEMPFAIL
    return EXIT_SIGTERM if got else EXIT_OK


def _export_metrics(args: argparse.Namespace, metrics: JobMetrics, queue: str) -> None:
    """Write/push the tick's metrics; a failure is reported, the tick's outcome stands."""
    if args.metrics_textfile:
        try:
            metrics.write_textfile(args.metrics_textfile)
        except OSError as exc:
            print(f"bunq: cannot write {args.metrics_textfile}: {exc}", file=sys.stderr)
    if args.pushgateway:
        try:
            metrics.push(args.pushgateway, job="bunq_tick", grouping={"queue": queue})
        except OSError as exc:  # URLError and HTTPError are OSErrors
            print(f"bunq: cannot push to {args.pushgateway}: {exc}", file=sys.stderr)


def cmd_worker(args: argparse.Namespace, be: Backend) -> int:
    from ..worker import Worker

    queue, handler = _queue(args), _handler(args)
    if args.metrics_port is not None:
        import prometheus_client

        from .. import metrics

        server, _ = prometheus_client.start_http_server(
            args.metrics_port, args.metrics_host, registry=metrics.registry()
        )
        port = server.server_address[1]
        print(f"bunq worker: metrics at http://{args.metrics_host}:{port}/metrics",
              file=sys.stderr)  # fmt: skip
    w = Worker(queue, handler, be, concurrency=args.concurrency,
               lease_ms=args.lease_ms or args.settings.lease_ms,
               health_file=args.health_file)  # fmt: skip
    print(f"bunq worker: {queue} on {be.kind}, concurrency {args.concurrency}; "
          "SIGTERM/Ctrl-C finishes running jobs and exits", file=sys.stderr)  # fmt: skip
    w.run()
    print(f"bunq worker: processed {w.processed}, failed {w.failed}", file=sys.stderr)
    return EXIT_OK


def _read_jobs(stream: IO[str]) -> Iterator[dict[str, Any]]:
    for n, line in enumerate(stream, 1):
        if not line.strip():
            continue
        item = parse_json(line, f"line {n}")
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValidationError(f'line {n}: expected {{"name": ..., "data": ..., "opts": ...}}')
        yield item


def _batches(items: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


def cmd_add(args: argparse.Namespace, be: Backend) -> int:
    q = Queue(args.queue, be)
    if args.file is None:
        opts = parse_json(args.opts, "--opts") or {}
        if not isinstance(opts, dict):
            raise ValidationError("--opts must be a JSON object")
        job = q.add(args.name, parse_json(args.data, "--data"), **opts)
        out(args, {"id": job.id, "queue": job.queue, "state": job.state.value}, job.id)
        return EXIT_OK
    stream = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
    added, prog = 0, Progress()
    try:
        for batch in _batches(_read_jobs(stream), BULK_BATCH):
            try:
                added += len(q.add_bulk(batch))
            except BunqError as exc:
                exc.args = (f"{exc} (after {count(added, 'job')} were added)",)
                raise
            prog.update(partial(_added_line, added, prog))
    finally:
        prog.done()
        if stream is not sys.stdin:
            stream.close()
    rate = added / prog.elapsed()
    out(args, {"queue": args.queue, "added": added},
        f"added {count(added, 'job')} to {args.queue} ({rate:,.0f} jobs/s)")  # fmt: skip
    return EXIT_OK


def _added_line(added: int, prog: Progress) -> str:
    return f"bunq add: {added:,} jobs ({added / prog.elapsed():,.0f}/s)"


def cmd_stats(args: argparse.Namespace, be: Backend) -> int:
    queues = [args.queue] if args.queue else be.queues()
    table = {q: {s.value: int(n) for s, n in be.counts(q).items()} for q in queues}
    if args.json:
        out(args, table, "")
        return EXIT_OK
    print(f"{'queue':<24}" + "".join(f"{s:>17}" for s in STATES))
    for q, counts in table.items():
        print(f"{q:<24}" + "".join(f"{counts.get(s, 0):>17,}" for s in STATES))
    if not table:
        print("(no queues)")
    return EXIT_OK


def cmd_dlq(args: argparse.Namespace, be: Backend) -> int:
    if args.action == "list":
        entries = be.dlq_list(args.queue, args.limit)
        rows = [{"id": e.job.id, "name": e.job.name, "reason": e.reason.value,
                 "error": split(e.error)[0], "stacktrace": split(e.error)[1],
                 "attempts": e.job.attempts, "entered_at": e.entered_at}
                for e in entries]  # fmt: skip
        text = "\n".join(f"{e.job.id}  {when(e.entered_at)}  {e.job.name}  {e.reason.value}  "
                         f"{split(e.error)[0]}" for e in entries)  # fmt: skip
        out(args, rows, text or f"the DLQ of {args.queue} is empty")
    elif args.action == "retry":
        n = be.dlq_retry(args.queue, args.id)
        out(args, {"retried": n}, f"moved {count(n, 'job')} of {args.queue} back to waiting")
    else:
        n = be.dlq_purge(args.queue)
        out(args, {"purged": n}, f"removed {count(n, 'job')} from the DLQ of {args.queue}")
    return EXIT_OK


def cmd_cron(args: argparse.Namespace, be: Backend) -> int:
    from ..cron import Schedule, Scheduler

    sched = Scheduler(be)
    if args.action == "list":
        items = sched.list(args.queue)
        text = "\n".join(f"{s.name}  {s.queue}/{s.job_name}  "
                         f"{s.cron or f'every {s.every_ms} ms'}  next {when(s.next_run)}  "
                         f"runs {s.runs}" for s in items)  # fmt: skip
        out(args, [s.to_dict() for s in items], text or "no schedules")
    elif args.action == "remove":
        if not sched.remove(args.name):
            raise ConfigError(f"no schedule named {args.name!r} (see: bunq cron list)")
        out(args, {"removed": args.name}, f"removed schedule {args.name}")
    else:
        s = sched.upsert(Schedule(
            args.name, args.queue, args.job_name, cron=args.cron, every_ms=args.every,
            data=parse_json(args.data, "--data"), opts=parse_json(args.opts, "--opts") or {},
            tz=args.tz, start_at=args.start_at, end_at=args.end_at, limit=args.limit,
            catch_up=args.catch_up, prevent_overlap=not args.allow_overlap))  # fmt: skip
        out(args, s.to_dict(), f"schedule {s.name}: next run at {when(s.next_run)}")
    return EXIT_OK


def cmd_webhooks(args: argparse.Namespace, be: Backend) -> int:
    """``bunq webhooks run``: a :class:`~bunq.webhooks.WebhookRunner` until SIGTERM/SIGINT."""
    import threading

    from ..webhooks import TargetGuard, WebhookRunner

    runner = WebhookRunner(be, args.queues, guard=TargetGuard(args.allow))
    stop = threading.Event()
    old = {sig: signal.signal(sig, lambda signum, frame: stop.set())
           for sig in (signal.SIGTERM, signal.SIGINT)}  # fmt: skip
    try:
        runner.start()
        which = ", ".join(args.queues) if args.queues else "the queues webhooks name"
        print(f"bunq webhooks: delivering from {be.kind} ({which}); run one per deployment; "
              "SIGTERM/Ctrl-C stops", file=sys.stderr, flush=True)  # fmt: skip
        while not stop.wait(1.0):
            pass
    finally:
        runner.close()
        for sig, handler in old.items():
            signal.signal(sig, handler)
    d = runner.dispatcher
    print(f"bunq webhooks: delivered {d.delivered}, failed {d.failed}, dropped {d.dropped}",
          file=sys.stderr)  # fmt: skip
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace, be: Backend) -> int:
    migrate = getattr(be, "migrate", None)
    if callable(migrate):
        version = migrate()
    elif be.kind in ("sqlite", "sql"):
        from ..backends.sql.queries import SQLITE_SCHEMA_VERSION

        version = SQLITE_SCHEMA_VERSION  # the SQLite backend upgrades its schema on open
    else:
        version = None
    out(args, {"backend": be.kind, "schema_version": version},
        f"{be.kind}: schema v{version}, up to date" if version is not None
        else f"{be.kind}: no schema to migrate")  # fmt: skip
    return EXIT_OK


def _demo_job(job: Job) -> int:
    if job.data % 100 == 0 and job.attempts == 1:
        raise Retry("every 100th job fails once to show a retry", delay_ms=0)
    return int(job.data) ** 2


def cmd_demo(args: argparse.Namespace, be: Backend) -> int:
    q = Queue("demo", be)
    q.drain()
    q.clean(0, 100_000)  # the most one Clean removes over bunq:// too
    q.clean(0, 100_000, "failed")
    url = args.backend or DEMO_BACKEND
    if not args.json:
        print(f"bunq demo on {url}")
    t0 = time.perf_counter()
    for batch in _batches(({"name": "square", "data": i} for i in range(args.jobs)), BULK_BATCH):
        q.add_bulk(batch)
    t1 = time.perf_counter()
    r = tick("demo", _demo_job, be, max=1000, loop_while_more=True)
    while r.queue_depth:  # the retried jobs are due again at once
        r = r.merge(tick("demo", _demo_job, be, max=1000, loop_while_more=True))
    t2 = time.perf_counter()
    counts = dict(q.counts())
    summary = {"backend": url, "jobs": args.jobs, "add_ms": round((t1 - t0) * 1000),
               "add_per_s": round(args.jobs / (t1 - t0)), "succeeded": r.succeeded,
               "retried": r.failed, "tick_ms": round((t2 - t1) * 1000),
               "tick_per_s": round(r.succeeded / (t2 - t1)), "ticks": r.ticks,
               "counts": counts}  # fmt: skip
    out(args, summary,
        f"  added {count(args.jobs, 'job')} in {summary['add_ms']} ms "
        f"({summary['add_per_s']:,} jobs/s)\n"
        f"  tick(): {r.succeeded} succeeded, {r.failed} failed once and were retried, in "
        f"{summary['tick_ms']} ms ({summary['tick_per_s']:,} jobs/s, {r.ticks} ticks)\n"
        f"  counts: {counts}\n"
        f"next: bunq stats --backend {url}")  # fmt: skip
    if args.live:
        from .livedemo import run

        return run(args, be, q)
    return EXIT_OK


COMMANDS = {"tick": cmd_tick, "worker": cmd_worker, "add": cmd_add, "stats": cmd_stats,
            "dlq": cmd_dlq, "cron": cmd_cron, "webhooks": cmd_webhooks, "migrate": cmd_migrate,
            "demo": cmd_demo}  # fmt: skip
