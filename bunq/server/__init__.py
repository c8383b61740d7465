"""``bunq serve``: an asyncio TCP (bunqueue protocol v3) + HTTP server around one backend.

``main(argv)`` is the CLI entry (``bunq serve`` and ``python -m bunq.server``);
:class:`Server` and :class:`BackgroundServer` embed it. Imports are lazy so
that ``import bunq.server`` alone starts nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..settings import Settings
    from .app import BackgroundServer, Server
    from .context import ServerConfig

__all__ = ["BackgroundServer", "Server", "ServerConfig", "main"]


def main(argv: list[str] | None = None, settings: Settings | None = None) -> int:
    """Run ``bunq serve`` with command-line ``argv``; return the exit code."""
    from .cli import main as _main

    return _main(argv, settings)


def __getattr__(name: str) -> Any:
    if name in ("Server", "BackgroundServer"):
        from . import app

        return getattr(app, name)
    if name == "ServerConfig":
        from .context import ServerConfig

        return ServerConfig
    raise AttributeError(name)
