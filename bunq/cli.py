"""The ``bunq`` command: tick, worker, add, stats, dlq, cron, migrate, demo, serve.

Every subcommand takes ``--backend URL`` (default ``BUNQ_BACKEND``, else
``sqlite:///bunq.db``). Mistakes get one line on stderr and a documented exit
code (:data:`EPILOG`, docs/cli.md), never a traceback (``-v`` shows one).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any
from urllib.parse import parse_qs, quote, urlsplit

from . import logs
from .backends import connect
from .backends.base import Backend
from .errors import (
    BackendError,
    BunqError,
    ConfigError,
    DataFileLocked,
    MissingDependency,
    UnsupportedError,
    ValidationError,
)
from .job import Job
from .settings import Settings

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_NOT_AVAILABLE = 0, 1, 2, 3
EX_DATAERR, EX_UNAVAILABLE, EX_TEMPFAIL, EX_CONFIG = 65, 69, 75, 78
EXIT_SIGINT, EXIT_SIGTERM = 130, 143
DEMO_BACKEND = "sqlite:///bunq-demo.db"
EPILOG = """exit codes: 0 done, 1 internal error, 2 usage, 3 an optional dependency is missing,
  65 bad input data, 69 backend unavailable, 75 tick left outcomes unsettled,
  78 configuration error, 130 SIGINT, 143 SIGTERM (docs/cli.md)"""
BULK_BATCH = 1000
log = logging.getLogger("bunq.cli")


def exit_code(exc: BaseException) -> int:
    """Map an error to the documented exit code."""
    if isinstance(exc, MissingDependency):
        return EXIT_NOT_AVAILABLE
    if isinstance(exc, (ConfigError, UnsupportedError)):
        return EX_CONFIG
    if isinstance(exc, ValidationError):
        return EX_DATAERR
    if isinstance(exc, BackendError):
        return EX_UNAVAILABLE
    return EXIT_INTERNAL


def _json(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValidationError(f"{what} is not valid JSON ({exc}): {text[:80]!r}") from None


def _out(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, default=str) if getattr(args, "json", False) else text)


def _handler(args: argparse.Namespace) -> Any:
    """Import --handler (or BUNQ_HANDLER) with the current directory importable."""
    from .tick import load_handler

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return load_handler(args.handler or args.settings.handler)


def cmd_tick(args: argparse.Namespace, be: Backend) -> int:
    from .tick import tick

    queue = args.queue or args.settings.queue
    if not queue:
        raise ConfigError("no queue: give it (bunq tick QUEUE) or set BUNQ_QUEUE")
    handler = _handler(args)
    got: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        deadline = None if args.deadline is None else int(args.deadline * 1000)
        r = tick(queue, handler, be, max=args.max, lease_ms=args.lease_ms or args.settings.lease_ms,
                 concurrency=args.concurrency, deadline_ms=deadline, stop=lambda: bool(got),
                 loop_while_more=args.loop_while_more)  # fmt: skip
    finally:
        signal.signal(signal.SIGTERM, old)
    _out(args, {"queue": queue, **r.to_dict()},
         f"{queue}: leased {r.leased}, succeeded {r.succeeded}, failed {r.failed} "
         f"({r.moved_to_dlq} to DLQ), stale {r.stale}, unsettled {r.unsettled}, "
         f"released {r.released}; stopped: {r.stopped}; depth {r.queue_depth}; "
         f"{r.duration_ms} ms")  # fmt: skip
    if r.unsettled:
        print(f"bunq: {r.unsettled} outcomes were not recorded; those jobs will run again",
              file=sys.stderr)  # fmt: skip
        return EX_TEMPFAIL
    return EXIT_SIGTERM if got else EXIT_OK


def cmd_worker(args: argparse.Namespace, be: Backend) -> int:
    from .worker import Worker

    queue = args.queue or args.settings.queue
    if not queue:
        raise ConfigError("no queue: give it (bunq worker QUEUE) or set BUNQ_QUEUE")
    handler = _handler(args)
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
        item = _json(line, f"line {n}")
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValidationError(f'line {n}: expected {{"name": ..., "data": ..., "opts": ...}}')
        yield item


def _batches(items: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


def cmd_add(args: argparse.Namespace, be: Backend) -> int:
    from .queue import Queue

    q = Queue(args.queue, be)
    if args.file is None:
        if not args.name:
            raise ConfigError("give a job NAME, or --file jobs.jsonl (- for stdin)")
        opts = _json(args.opts, "--opts") or {}
        if not isinstance(opts, dict):
            raise ValidationError("--opts must be a JSON object")
        job = q.add(args.name, _json(args.data, "--data"), **opts)
        _out(args, {"id": job.id, "queue": job.queue, "state": job.state.value}, job.id)
        return EXIT_OK
    stream = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")  # noqa: SIM115
    tty, added, t0 = sys.stderr.isatty(), 0, time.perf_counter()
    try:
        for batch in _batches(_read_jobs(stream), BULK_BATCH):
            try:
                added += len(q.add_bulk(batch))
            except BunqError as exc:
                exc.args = (f"{exc} (after {added} jobs were added)",)
                raise
            if tty:
                print(f"\radded {added:,} jobs", end="", file=sys.stderr, flush=True)
    finally:
        if stream is not sys.stdin:
            stream.close()
    if tty:
        print(file=sys.stderr)
    rate = added / max(time.perf_counter() - t0, 1e-9)
    _out(args, {"queue": args.queue, "added": added},
         f"added {added} jobs to {args.queue} ({rate:,.0f} jobs/s)")  # fmt: skip
    return EXIT_OK


def cmd_stats(args: argparse.Namespace, be: Backend) -> int:
    queues = [args.queue] if args.queue else be.queues()
    table = {q: {s.value: n for s, n in be.counts(q).items()} for q in queues}
    if args.json:
        print(json.dumps(table))
        return EXIT_OK
    states = ["waiting", "delayed", "active", "completed", "failed", "waiting-children", "paused"]
    print(f"{'queue':<24}" + "".join(f"{s:>17}" for s in states))
    for q, counts in table.items():
        print(f"{q:<24}" + "".join(f"{counts.get(s, 0):>17}" for s in states))
    if not table:
        print("(no queues)")
    return EXIT_OK


def cmd_dlq(args: argparse.Namespace, be: Backend) -> int:
    if args.action == "list":
        entries = be.dlq_list(args.queue, args.limit)
        rows = [{"id": e.job.id, "name": e.job.name, "reason": e.reason.value, "error": e.error,
                 "attempts": e.job.attempts, "entered_at": e.entered_at}
                for e in entries]  # fmt: skip
        text = "\n".join(f"{r['id']}  {r['name']}  {r['reason']}  {r['error']}" for r in rows)
        _out(args, rows, text or f"the DLQ of {args.queue} is empty")
    elif args.action == "retry":
        n = be.dlq_retry(args.queue, args.id)
        _out(args, {"retried": n}, f"moved {n} jobs of {args.queue} back to waiting")
    else:
        n = be.dlq_purge(args.queue)
        _out(args, {"purged": n}, f"removed {n} jobs from the DLQ of {args.queue}")
    return EXIT_OK


def cmd_cron(args: argparse.Namespace, be: Backend) -> int:
    from .cron import Schedule, Scheduler

    sched = Scheduler(be)
    if args.action == "list":
        items = sched.list(args.queue)
        _out(args, [s.to_dict() for s in items], "\n".join(
            f"{s.name}  {s.queue}/{s.job_name}  {s.cron or f'every {s.every_ms} ms'}  "
            f"next {s.next_run}  runs {s.runs}" for s in items) or "no schedules")  # fmt: skip
    elif args.action == "remove":
        if not sched.remove(args.name):
            raise ConfigError(f"no schedule named {args.name!r} (see: bunq cron list)")
        _out(args, {"removed": args.name}, f"removed schedule {args.name}")
    else:
        if not args.queue or not args.job_name or (args.cron is None) == (args.every is None):
            raise ConfigError("cron add NAME --queue Q --job NAME (--cron EXPR | --every MS)")
        s = sched.upsert(Schedule(
            args.name, args.queue, args.job_name, cron=args.cron, every_ms=args.every,
            data=_json(args.data, "--data"), opts=_json(args.opts, "--opts") or {}, tz=args.tz,
            start_at=args.start_at, end_at=args.end_at, limit=args.limit,
            catch_up=args.catch_up, prevent_overlap=not args.allow_overlap))  # fmt: skip
        _out(args, s.to_dict(), f"schedule {s.name}: next run at {s.next_run} (epoch ms)")
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace, be: Backend) -> int:
    migrate = getattr(be, "migrate", None)
    if callable(migrate):
        version = migrate()
    elif be.kind in ("sqlite", "sql"):
        from .backends.sql.queries import SCHEMA_VERSION

        version = SCHEMA_VERSION  # the SQLite backend creates/upgrades its schema on open
    else:
        version = None
    _out(args, {"backend": be.kind, "schema_version": version},
         f"{be.kind}: schema v{version}, up to date" if version is not None
         else f"{be.kind}: no schema to migrate")  # fmt: skip
    return EXIT_OK


def _demo_job(job: Job) -> int:
    from .errors import Retry

    if job.data % 100 == 0 and job.attempts == 1:
        raise Retry("every 100th job fails once to show a retry", delay_ms=0)
    return int(job.data) ** 2


def cmd_demo(args: argparse.Namespace, be: Backend) -> int:
    from .queue import Queue
    from .tick import tick

    q = Queue("demo", be)
    q.drain()
    q.clean(0, 1_000_000)
    q.clean(0, 1_000_000, "failed")
    print(f"bunq demo on {args.backend or DEMO_BACKEND}")
    t0 = time.perf_counter()
    for batch in _batches(({"name": "square", "data": i} for i in range(args.jobs)), BULK_BATCH):
        q.add_bulk(batch)
    t1 = time.perf_counter()
    print(f"  added {args.jobs} jobs in {(t1 - t0) * 1000:.0f} ms "
          f"({args.jobs / (t1 - t0):,.0f} jobs/s)")  # fmt: skip
    r = tick("demo", _demo_job, be, max=1000, loop_while_more=True)
    while r.queue_depth:  # the retried jobs are due again at once
        r = r.merge(tick("demo", _demo_job, be, max=1000, loop_while_more=True))
    t2 = time.perf_counter()
    print(f"  tick(): {r.succeeded} succeeded, {r.failed} failed once and were retried, in "
          f"{(t2 - t1) * 1000:.0f} ms ({r.succeeded / (t2 - t1):,.0f} jobs/s, {r.ticks} ticks)"
          )  # fmt: skip
    print(f"  counts: {q.counts()}")
    print("next: bunq stats --backend " + (args.backend or DEMO_BACKEND))
    return EXIT_OK


def cmd_serve(argv: list[str], settings: Settings) -> int:
    """Hand ``bunq serve ARGS`` to the server's own command line."""
    from .server import main as serve_main

    return int(serve_main(argv, settings) or 0)


# -- which backend a command opens -----------------------------------------------------------
READ_ONLY = {"stats": {}, "dlq list": [], "cron list": []}  # command -> its empty answer


def data_file(url: str) -> str | None:
    """The file a ``sqlite://`` or ``memory://?data=`` URL keeps its jobs in, if any."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        path = (parts.netloc + parts.path)[1:]
        return path or None
    if parts.scheme == "memory":
        return parse_qs(parts.query).get("data", [None])[-1]
    return None


def open_backend(args: argparse.Namespace) -> Backend | None:
    """Open ``--backend``, else ``BUNQ_BACKEND``, else ``bunq serve``'s data file.

    A data file owned by a running ``bunq serve`` is reached through that server
    (it notes its address in the file's lock). A read-only command on a file that
    does not exist yet gets None (nothing to show) instead of creating the file.
    """
    settings: Settings = args.settings
    url = args.backend or (DEMO_BACKEND if args.command == "demo" else settings.cli_backend())
    path = data_file(url)
    if path and _what(args) in READ_ONLY and not os.path.exists(path):
        return None
    try:
        return connect(url)
    except DataFileLocked as exc:
        owner = exc.data.get("owner") or {}
        served = owner.get("serve") if isinstance(owner, dict) else None
        if not served:
            raise
        token = settings.auth_tokens[0] if settings.auth_tokens else None
        print(f"bunq: {path} is served by bunq serve (pid {owner.get('pid', '?')}); "
              f"reaching it through bunq://{served}", file=sys.stderr)  # fmt: skip
        return connect(f"bunq://{served}" + (f"?token={quote(token)}" if token else ""))


def _what(args: argparse.Namespace) -> str:
    action = getattr(args, "action", None)
    return f"{args.command} {action}" if action else args.command


def build_parser() -> argparse.ArgumentParser:
    """Return the ``bunq`` argument parser (``bunq COMMAND -h`` for each command)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--backend", metavar="URL",
                        help="backend URL (default BUNQ_BACKEND, else sqlite:///bunq.db)"
                        )  # fmt: skip
    common.add_argument("--json", action="store_true", help="print JSON on stdout")
    common.add_argument("-v", "--verbose", action="store_true", help="debug logs, tracebacks")
    common.add_argument("--log-format", choices=logs.FORMATS, default=None,
                        help="BUNQ_LOG_FORMAT: auto (text on a terminal, else JSON), json, text"
                        )  # fmt: skip
    p = argparse.ArgumentParser(prog="bunq", description="A durable job queue for Python.",
                                epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    from . import __version__

    p.add_argument("--version", action="version", version=f"bunq {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], help=help, description=help)

    for name, doc in (("tick", "drain due jobs once (CronJob, Cloud Run job) and exit"),
                      ("worker", "process jobs until SIGTERM (graceful)")):  # fmt: skip
        c = add(name, doc)
        c.add_argument("queue", nargs="?", metavar="QUEUE", help="queue (default BUNQ_QUEUE)")
        c.add_argument("--handler", metavar="MODULE:FUNCTION",
                       help="job handler (default BUNQ_HANDLER); ./ is importable")  # fmt: skip
        c.add_argument("--concurrency", type=int, default=1, metavar="N", help="jobs at once")
        c.add_argument("--lease-ms", type=int, metavar="MS", help="lease (default BUNQ_LEASE_MS)")
    sub.choices["worker"].add_argument(
        "--health-file", metavar="PATH",
        help="touch PATH while the worker makes progress (for a liveness probe)")  # fmt: skip
    t = sub.choices["tick"]
    t.add_argument("--max", type=int, default=100, metavar="N", help="jobs per tick (100)")
    t.add_argument("--loop-while-more", action="store_true",
                   help="tick again while each tick fills its batch")  # fmt: skip
    t.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="stop starting jobs that could not finish within SECONDS")  # fmt: skip

    a = add("add", "add one job, or many from a JSON-lines file")
    a.add_argument("queue", metavar="QUEUE")
    a.add_argument("name", nargs="?", metavar="NAME", help="job name (one job)")
    a.add_argument("--data", metavar="JSON", help="job data as JSON")
    a.add_argument("--opts", metavar="JSON", help='job options as JSON, e.g. {"delay": 5000}')
    a.add_argument("--file", metavar="PATH", help='jobs file, one {"name","data","opts"} a line '
                   "(- for stdin); added in atomic batches of 1,000")  # fmt: skip

    s = add("stats", "job counts per queue and state")
    s.add_argument("queue", nargs="?", metavar="QUEUE", help="one queue (default: all)")

    d = add("dlq", "list, retry or purge a queue's dead-letter jobs")
    d.add_argument("action", choices=["list", "retry", "purge"])
    d.add_argument("queue", metavar="QUEUE")
    d.add_argument("--id", metavar="JOB_ID", help="retry only this job")
    d.add_argument("--limit", type=int, default=100, metavar="N", help="entries listed (100)")

    _cron_parser(add("cron", "list, add (create or update) or remove cron schedules"))
    add("migrate", "create or upgrade the backend's schema and print its version")
    dm = add("demo", f"a self-contained demo on {DEMO_BACKEND} (jobs/s with tick())")
    dm.add_argument("--jobs", type=int, default=1000, metavar="N")
    sub.add_parser("serve", help="run the bunq server (see: bunq serve --help)")
    return p


def _cron_parser(c: argparse.ArgumentParser) -> None:
    c.add_argument("action", choices=["list", "add", "remove"])
    c.add_argument("name", nargs="?", metavar="NAME", help="schedule name (add, remove)")
    c.add_argument("--queue", metavar="QUEUE", help="queue of the jobs (list: filter)")
    c.add_argument("--job", dest="job_name", metavar="NAME", help="name of each job")
    c.add_argument("--cron", metavar="EXPR", help="'*/5 * * * *' (6 fields: seconds first)")
    c.add_argument("--every", type=int, metavar="MS", help="fixed interval instead of --cron")
    c.add_argument("--tz", default="UTC", help="time zone of the expression (UTC)")
    c.add_argument("--data", metavar="JSON")
    c.add_argument("--opts", metavar="JSON")
    c.add_argument("--start-at", type=int, metavar="EPOCH_MS")
    c.add_argument("--end-at", type=int, metavar="EPOCH_MS")
    c.add_argument("--limit", type=int, metavar="N", help="stop after N runs")
    c.add_argument("--catch-up", action="store_true", help="after downtime, run once late")
    c.add_argument("--allow-overlap", action="store_true",
                   help="fire even while the previous run's job is live")  # fmt: skip


COMMANDS = {"tick": cmd_tick, "worker": cmd_worker, "add": cmd_add, "stats": cmd_stats,
            "dlq": cmd_dlq, "cron": cmd_cron, "migrate": cmd_migrate, "demo": cmd_demo}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code (``bunq`` calls ``sys.exit`` on it)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:  # the server parses its own options
        return _guarded("serve", False, False, lambda s: cmd_serve(argv[1:], s))
    args = build_parser().parse_args(argv)
    return _guarded(args.command, args.verbose, args.json, lambda s: _run(args, s))


def _run(args: argparse.Namespace, settings: Settings) -> int:
    args.settings = settings
    level = "DEBUG" if args.verbose else settings.log_level.upper()
    logs.setup(level, args.log_format or settings.log_format)  # type: ignore[arg-type]
    be = open_backend(args)
    if be is None:
        url = args.backend or settings.cli_backend()
        _out(args, READ_ONLY[_what(args)], f"nothing to show: {data_file(url)} does not exist "
             "yet (start 'bunq serve', or pass --backend URL)")  # fmt: skip
        return EXIT_OK
    try:
        return COMMANDS[args.command](args, be)
    finally:
        be.close()


def _guarded(command: str, verbose: bool, as_json: bool, run: Any) -> int:
    """Run ``run(settings)``; map errors to one line on stderr and the documented code."""
    try:
        return int(run(Settings.from_env()))
    except KeyboardInterrupt:
        return EXIT_SIGINT
    except BunqError as exc:
        if verbose:
            log.exception("failed")
        print(f"bunq {command}: error: {exc}", file=sys.stderr)
        partial = exc.data.get("tick") if isinstance(exc.data, dict) else None
        if partial is not None and as_json:
            print(json.dumps(partial))
        return exit_code(exc)
    except OSError as exc:  # a jobs file that cannot be read, a directory that is missing
        print(f"bunq {command}: error: {exc}", file=sys.stderr)
        return EX_CONFIG
