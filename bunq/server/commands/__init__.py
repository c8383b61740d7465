"""The command table: wire command name -> async handler.

Handlers live in one module per area (produce, consume, query, control, cron,
monitor, ``wait``, ``jobops``, and ``bq`` for bunq's own extensions); each registers itself with
:func:`command`. A handler returns the reply fields; the connection adds
``ok`` and ``reqId``, and turns a raised :class:`~bunq.errors.BunqError`
into ``{ok: false, error, code}``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..context import Handler

COMMANDS: dict[str, Handler] = {}
AREAS = ("produce", "consume", "query", "control", "cron", "monitor", "bq", "wait", "jobops",
         "webhooks", "admin", "groups", "children")  # fmt: skip


def command(*names: str) -> Callable[[Handler], Handler]:
    """Register the decorated handler under each of ``names``."""

    def register(fn: Handler) -> Handler:
        for name in names:
            if name in COMMANDS:
                raise RuntimeError(f"command {name!r} registered twice")
            COMMANDS[name] = fn
        return fn

    return register


def load() -> dict[str, Handler]:
    """Import every handler module (registering them) and return the table."""
    import importlib

    for area in AREAS:
        importlib.import_module(f"{__name__}.{area}")
    return COMMANDS
