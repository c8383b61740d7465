"""``bunq serve``: flags, defaults from :class:`bunq.settings.Settings`, run until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import signal
import sys

from ..backends import connect
from ..errors import BunqError
from ..protocol import DEFAULT_MAX_FRAME
from ..settings import DEFAULT_BACKEND, Settings
from . import logs
from .app import Server
from .context import ServerConfig

DEFAULT_IDLE_TIMEOUT = 60.0


def default_backend(settings: Settings) -> str:
    """``BUNQ_BACKEND`` if set; else the memory engine with SQLite write-behind at
    ``BUNQ_DATA_PATH`` (``./bunq-data.db``); else ``sqlite:///bunq.db``."""
    if settings.backend != DEFAULT_BACKEND:
        return settings.backend
    if importlib.util.find_spec("bunq.backends.embedded") is not None:
        return f"memory://?data={settings.data_path}"
    return DEFAULT_BACKEND


def parser(settings: Settings) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bunq serve",
        description="Serve a bunq backend over TCP (bunqueue protocol v3) "
        "and HTTP (health, metrics).",
    )
    p.add_argument("--host", default=settings.host, help="interface to bind (BUNQ_HOST)")
    p.add_argument(
        "--port",
        type=int,
        default=settings.tcp_port,
        help="TCP port, 0 picks one (BUNQ_TCP_PORT, 6789)",
    )
    p.add_argument(
        "--http-port",
        type=int,
        default=settings.http_port,
        help="HTTP port, 0 picks one, -1 disables (BUNQ_HTTP_PORT, 6790)",
    )
    p.add_argument(
        "--backend",
        default=None,
        metavar="URL",
        help="backend URL (BUNQ_BACKEND; default memory://?data=./bunq-data.db)",
    )
    p.add_argument(
        "--token",
        action="append",
        default=None,
        metavar="TOKEN",
        help="accepted Auth token, repeatable (BUNQ_AUTH_TOKENS, comma separated)",
    )
    p.add_argument(
        "--max-frame",
        type=int,
        default=getattr(settings, "max_frame", DEFAULT_MAX_FRAME),
        help=f"largest frame in bytes (BUNQ_MAX_FRAME, {DEFAULT_MAX_FRAME})",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=getattr(settings, "idle_timeout", DEFAULT_IDLE_TIMEOUT),
        help="close connections idle this many seconds (BUNQ_IDLE_TIMEOUT, 60)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="backend threads (default 1 for SQLite, inline for memory)",
    )
    p.add_argument("--log-level", default=settings.log_level, help="BUNQ_LOG_LEVEL (INFO)")
    return p


def config_from(args: argparse.Namespace, settings: Settings) -> ServerConfig:
    tokens = tuple(args.token) if args.token else settings.auth_tokens
    return ServerConfig(
        host=args.host,
        port=args.port,
        http_port=None if args.http_port is not None and args.http_port < 0 else args.http_port,
        tokens=tokens,
        max_frame=args.max_frame,
        idle_timeout=args.idle_timeout,
        threads=args.threads or (4 if str(args.backend).startswith(("postgres", "redis")) else 1),
    )


async def _serve(server: Server, url: str) -> None:
    await server.start()
    http = f", http {server.config.host}:{server.http_port}" if server.http_port else ""
    print(f"bunq serve: tcp {server.config.host}:{server.port}{http}, backend {url}", flush=True)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    await done.wait()
    await server.stop()


def main(argv: list[str] | None = None) -> int:
    """Run ``bunq serve`` with ``argv``; return the exit code (0 after a graceful stop)."""
    settings = Settings.from_env()
    args = parser(settings).parse_args(argv)
    logs.setup(args.log_level)
    args.backend = args.backend or default_backend(settings)
    try:
        backend = connect(args.backend)
    except BunqError as exc:
        print(f"bunq serve: cannot open {args.backend}: {exc}", file=sys.stderr)
        return 2
    server = Server(backend, config_from(args, settings))
    try:
        asyncio.run(_serve(server, args.backend))
    except OSError as exc:  # the port is taken
        print(f"bunq serve: {exc}", file=sys.stderr)
        backend.close()
        return 1
    return 0
