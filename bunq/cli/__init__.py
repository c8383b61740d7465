"""The ``bunq`` command: tick, worker, add, stats, dlq, cron, webhooks, migrate, demo, serve.

Every subcommand takes ``--backend URL`` (default ``BUNQ_BACKEND``, else ``bunq
serve``'s data file: :mod:`bunq.cli.backend`). Mistakes get one line on stderr and
a documented exit code (:mod:`bunq.cli.exits`, docs/cli.md), never a traceback
(``-v`` shows one).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable

from .. import logs
from ..errors import BunqError
from ..settings import Settings
from .backend import READ_ONLY, data_file, open_backend, url_of, what
from .commands import COMMANDS
from .exits import EX_CONFIG, EXIT_OK, EXIT_SIGINT, exit_code
from .output import out
from .parser import build_parser

__all__ = ["build_parser", "main"]
log = logging.getLogger("bunq.cli")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code (``bunq`` calls ``sys.exit`` on it)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:  # the server parses its own options
        return _guarded("serve", False, False, lambda s: _serve(argv[1:], s))
    args = build_parser().parse_args(argv)
    return _guarded(what(args), args.verbose, getattr(args, "json", False),
                    lambda s: _run(args, s))  # fmt: skip


def _serve(argv: list[str], settings: Settings) -> int:
    from ..server import main as serve_main

    return int(serve_main(argv, settings) or 0)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    args.settings = settings
    level = "DEBUG" if args.verbose else settings.log_level.upper()
    logs.setup(level, args.log_format or settings.log_format)  # type: ignore[arg-type]
    be = open_backend(args, settings)
    if be is None:
        out(args, READ_ONLY[what(args)], f"nothing to show: {data_file(url_of(args, settings))} "
            "does not exist yet (start 'bunq serve', or pass --backend URL)")  # fmt: skip
        return EXIT_OK
    try:
        return COMMANDS[args.command](args, be)
    finally:
        be.close()


def _guarded(command: str, verbose: bool, as_json: bool,
             run: Callable[[Settings], int]) -> int:  # fmt: skip
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
