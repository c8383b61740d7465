"""The ``bunq`` argument parser: one subcommand per job, nested for ``dlq`` and ``cron``.

Each action has its own options, so an option that does not belong (``cron list
--limit 3``) is a usage error (exit 2), like a missing argument or a bad value.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .. import logs
from .backend import DEMO_BACKEND
from .exits import EPILOG


def _number(kind: type[int] | type[float], least: float) -> Callable[[str], float]:
    """An argparse type: ``kind`` (int or float) no smaller than ``least``."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least:g}, got {text}")
        return value

    return parse


POSITIVE = _number(int, 1)
LEASE_MS = _number(int, 100)
SECONDS = _number(float, 0.001)
EPOCH_MS = _number(int, 0)


def build_parser() -> argparse.ArgumentParser:
    """Return the ``bunq`` argument parser (``bunq COMMAND -h`` for each command)."""
    from .. import __version__

    base = argparse.ArgumentParser(add_help=False)
    base.add_argument("--backend", metavar="URL",
                      help="backend URL (default BUNQ_BACKEND, else bunq serve's data file)"
                      )  # fmt: skip
    base.add_argument("-v", "--verbose", action="store_true", help="debug logs, tracebacks")
    base.add_argument("--log-format", choices=logs.FORMATS, default=None,
                      help="BUNQ_LOG_FORMAT: auto (text on a terminal, else JSON), json, text"
                      )  # fmt: skip
    with_json = argparse.ArgumentParser(add_help=False, parents=[base])
    with_json.add_argument("--json", action="store_true", help="print the result as JSON")

    p = argparse.ArgumentParser(prog="bunq", description="A durable job queue for Python.",
                                epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--version", action="version", version=f"bunq {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(into: argparse._SubParsersAction[argparse.ArgumentParser], name: str, doc: str,
            json: bool = True) -> argparse.ArgumentParser:  # fmt: skip
        return into.add_parser(name, parents=[with_json if json else base], help=doc,
                               description=doc)  # fmt: skip

    t = add(sub, "tick", "drain due jobs once (CronJob, Cloud Run job) and exit")
    w = add(sub, "worker", "process jobs until SIGTERM (graceful)", json=False)
    for c in (t, w):
        c.add_argument("queue", nargs="?", metavar="QUEUE", help="queue (default BUNQ_QUEUE)")
        c.add_argument("--handler", metavar="MODULE:FUNCTION",
                       help="job handler (default BUNQ_HANDLER); ./ is importable")  # fmt: skip
        c.add_argument("--concurrency", type=POSITIVE, default=1, metavar="N",
                       help="jobs at once")  # fmt: skip
        c.add_argument("--lease-ms", type=LEASE_MS, metavar="MS",
                       help="lease (default BUNQ_LEASE_MS)")  # fmt: skip
    w.add_argument("--health-file", metavar="PATH",
                   help="touch PATH while the worker makes progress (liveness probe)")  # fmt: skip
    t.add_argument("--max", type=POSITIVE, default=100, metavar="N", help="jobs per tick (100)")
    t.add_argument("--loop-while-more", action="store_true",
                   help="tick again while each tick fills its batch (progress: stderr)"
                   )  # fmt: skip
    t.add_argument("--deadline", type=SECONDS, metavar="SECONDS",
                   help="start no job that could not finish within SECONDS")  # fmt: skip
    _metrics_export(t, w)

    a = add(sub, "add", "add one job, or many from a JSON-lines file")
    a.add_argument("queue", metavar="QUEUE")
    one = a.add_mutually_exclusive_group(required=True)
    one.add_argument("name", nargs="?", metavar="NAME", help="job name (one job)")
    one.add_argument("--file", metavar="PATH", help='jobs file, one {"name","data","opts"} a '
                     "line (- for stdin); added in atomic batches of 1,000")  # fmt: skip
    a.add_argument("--data", metavar="JSON", help="job data as JSON")
    a.add_argument("--opts", metavar="JSON", help='job options as JSON, e.g. {"delay": 5000}')

    s = add(sub, "stats", "job counts per queue and state")
    s.add_argument("queue", nargs="?", metavar="QUEUE", help="one queue (default: all)")

    dlq = add(sub, "dlq", "list, retry or purge a queue's dead-letter jobs").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    d = add(dlq, "list", "dead-lettered jobs with their reason and last error")
    d.add_argument("queue", metavar="QUEUE")
    d.add_argument("--limit", type=POSITIVE, default=100, metavar="N", help="entries (100)")
    d = add(dlq, "retry", "move dead-lettered jobs back to waiting with fresh attempts")
    d.add_argument("queue", metavar="QUEUE")
    d.add_argument("--id", metavar="JOB_ID", help="only this job (default: all)")
    add(dlq, "purge", "remove a queue's dead-lettered jobs").add_argument("queue", metavar="QUEUE")

    cron = add(sub, "cron", "list, add (create or update) or remove cron schedules"
               ).add_subparsers(dest="action", required=True, metavar="ACTION")  # fmt: skip
    add(cron, "list", "the schedules").add_argument("--queue", metavar="QUEUE",
                                                    help="only this queue's")  # fmt: skip
    add(cron, "remove", "remove a schedule").add_argument("name", metavar="NAME")
    _cron_add(add(cron, "add", "create or update a schedule (an unchanged one keeps its next run)"))

    _webhooks(add(sub, "webhooks", "deliver webhooks without bunq serve"), add)

    add(sub, "migrate", "create or upgrade the backend's schema and print its version")
    _demo(add(sub, "demo", f"a self-contained demo on {DEMO_BACKEND} (jobs/s with tick())"))
    sub.add_parser("serve", help="run the bunq server (see: bunq serve --help)")
    return p


def _webhooks(w: argparse.ArgumentParser, add: Callable[..., argparse.ArgumentParser]) -> None:
    """``bunq webhooks run``: a WebhookRunner (docs/webhooks.md)."""
    hooks = w.add_subparsers(dest="action", required=True, metavar="ACTION")
    wr = add(hooks, "run", "deliver the backend's webhooks from its job events until SIGTERM "
             "(run exactly one per deployment)", json=False)  # fmt: skip
    wr.add_argument("--queue", action="append", dest="queues", metavar="QUEUE",
                    help="read only this queue (repeatable; default: every queue a webhook "
                    "names, every queue when one names none)")  # fmt: skip
    wr.add_argument("--allow", action="append", default=[], metavar="CIDR",
                    help="a network webhooks may reach although the target guard refuses it "
                    "(e.g. 127.0.0.1/32; repeatable)")  # fmt: skip


def _demo(dm: argparse.ArgumentParser) -> None:
    dm.add_argument("--jobs", type=POSITIVE, default=1000, metavar="N")
    dm.add_argument(
        "--live",
        action="store_true",
        help="then keep adding and processing jobs until Ctrl-C (for the dashboard)",
    )
    dm.add_argument(
        "--rate",
        type=POSITIVE,
        default=20,
        metavar="N",
        help="jobs a second added with --live (20)",
    )


def _cron_add(c: argparse.ArgumentParser) -> None:
    c.add_argument("name", metavar="NAME", help="schedule name")
    c.add_argument("--queue", metavar="QUEUE", required=True, help="queue of the jobs")
    c.add_argument("--job", dest="job_name", metavar="NAME", required=True,
                   help="name of each job")  # fmt: skip
    when = c.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="EXPR", help="'*/5 * * * *' (6 fields: seconds first)")
    when.add_argument("--every", type=POSITIVE, metavar="MS", help="a fixed interval instead")
    c.add_argument("--tz", default="UTC", help="time zone of the expression (UTC)")
    c.add_argument("--data", metavar="JSON")
    c.add_argument("--opts", metavar="JSON")
    c.add_argument("--start-at", type=EPOCH_MS, metavar="EPOCH_MS")
    c.add_argument("--end-at", type=EPOCH_MS, metavar="EPOCH_MS")
    c.add_argument("--limit", type=POSITIVE, metavar="N", help="stop after N runs")
    c.add_argument("--catch-up", action="store_true", help="after downtime, run once late")
    c.add_argument("--allow-overlap", action="store_true",
                   help="fire even while the previous run's job is live")  # fmt: skip


def _metrics_export(t: argparse.ArgumentParser, w: argparse.ArgumentParser) -> None:
    """``bunq tick``'s metrics for a CronJob (a textfile, a Pushgateway); ``bunq worker``'s
    on an HTTP port."""
    w.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve the worker's Prometheus metrics on http://HOST:PORT/")  # fmt: skip
    w.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                   help="interface for --metrics-port (127.0.0.1; 0.0.0.0: scraped)")  # fmt: skip
    t.add_argument("--metrics-textfile", metavar="PATH",
                   help="write the tick's Prometheus metrics to PATH (node_exporter's "
                   "textfile collector) when it ends")  # fmt: skip
    t.add_argument("--pushgateway", metavar="URL",
                   help="push the tick's Prometheus metrics to this Pushgateway "
                   "(job bunq_tick, grouped by queue) when it ends")  # fmt: skip
