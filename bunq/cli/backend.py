"""Which backend a ``bunq`` command opens (docs/cli.md, "The default backend")."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from ..backends import connect
from ..backends.base import Backend
from ..errors import DataFileLocked
from ..settings import Settings

DEMO_BACKEND = "sqlite:///bunq-demo.db"
# command -> its empty answer
READ_ONLY: dict[str, dict[str, Any] | list[Any]] = {"stats": {}, "dlq list": [], "cron list": []}


def data_file(url: str) -> str | None:
    """The file a ``sqlite://`` or ``memory://?data=`` URL keeps its jobs in, if any."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        path = (parts.netloc + parts.path)[1:]
        return path or None
    if parts.scheme == "memory":
        return parse_qs(parts.query).get("data", [None])[-1]
    return None


def what(args: argparse.Namespace) -> str:
    """The command as a reader names it: ``stats``, ``dlq list``."""
    action = getattr(args, "action", None)
    return f"{args.command} {action}" if action else str(args.command)


def url_of(args: argparse.Namespace, settings: Settings) -> str:
    """``--backend``, else ``BUNQ_BACKEND``, else bunq serve's data file (the demo: its own)."""
    if args.backend:
        return str(args.backend)
    return DEMO_BACKEND if args.command == "demo" else settings.cli_backend()


def open_backend(args: argparse.Namespace, settings: Settings) -> Backend | None:
    """Open the command's backend.

    A data file owned by a running ``bunq serve`` is reached through that server
    (it notes its address in the file's lock). A read-only command on a file that
    does not exist yet gets None (nothing to show) instead of creating the file.
    """
    url = url_of(args, settings)
    path = data_file(url)
    if path and what(args) in READ_ONLY and not os.path.exists(path):
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
