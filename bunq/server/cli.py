"""``bunq serve``: flags, defaults from :class:`bunq.settings.Settings`, run until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import signal
import sys

from ..backends import connect
from ..backends.urls import redact
from ..errors import BunqError
from ..settings import DEFAULT_BACKEND, Settings
from . import logs
from .app import Server
from .context import ServerConfig

LIMITS: tuple[tuple[str, str, type, str], ...] = (
    ("--max-frame", "max_frame", int, "largest frame in bytes"),
    ("--pre-auth-frame", "pre_auth_frame", int, "largest frame in bytes before Auth"),
    ("--idle-timeout", "idle_timeout", float, "close connections idle this many seconds"),
    ("--max-connections", "max_connections", int, "open TCP connections"),
    ("--max-unauthenticated", "max_unauthenticated", int, "connections not yet authenticated"),
    ("--auth-timeout", "auth_timeout", float, "seconds a connection has to authenticate"),
    ("--max-auth-failures", "max_auth_failures", int, "wrong tokens before a connection closes"),
    ("--auth-fail-delay", "auth_fail_delay", float, "seconds before a wrong token is answered"),
    ("--max-inflight", "max_inflight", int, "requests served at once per connection"),
    ("--max-unsent", "max_unsent", int, "bytes of unread replies before reading stops"),
    ("--scrape-cache", "scrape_cache", float, "seconds a /metrics or /stats answer is reused"),
)
"""The limits ``bunq serve`` takes as flags: (flag, Settings/ServerConfig field, type, help)."""


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
    for flag, name, kind, meaning in LIMITS:
        default = getattr(settings, name)
        p.add_argument(
            flag,
            type=kind,
            default=default,
            metavar="N",
            help=f"{meaning} (BUNQ_{name.upper()}, {default})",
        )
    p.add_argument(
        "--http-auth",
        choices=("on", "off"),
        default="on" if settings.http_auth else "off",
        help="with tokens, /metrics and /stats need 'Authorization: Bearer <token>' "
        "(BUNQ_HTTP_AUTH, on)",
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
    limits = {name: getattr(args, name) for _, name, _, _ in LIMITS}
    return ServerConfig(
        **limits,
        host=args.host,
        port=args.port,
        http_port=None if args.http_port is not None and args.http_port < 0 else args.http_port,
        tokens=tokens,
        http_auth=args.http_auth == "on",
        threads=args.threads or (4 if str(args.backend).startswith("postgres") else 1),
    )


async def _serve(server: Server, url: str) -> None:
    await server.start()
    http = f", http {server.config.host}:{server.http_port}" if server.http_port else ""
    shown = redact(url)
    print(f"bunq serve: tcp {server.config.host}:{server.port}{http}, backend {shown}", flush=True)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    await done.wait()
    await server.stop()


def _raise_fd_limit(wanted: int) -> None:
    """Let the process hold ``max_connections`` sockets (the soft limit is often 1024)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


def main(argv: list[str] | None = None) -> int:
    """Run ``bunq serve`` with ``argv``; return the exit code (0 after a graceful stop)."""
    settings = Settings.from_env()
    args = parser(settings).parse_args(argv)
    logs.setup(args.log_level)
    args.backend = args.backend or default_backend(settings)
    try:
        config = config_from(args, settings)
    except BunqError as exc:
        print(f"bunq serve: {exc}", file=sys.stderr)
        return 2
    try:
        backend = connect(args.backend)
    except BunqError as exc:
        print(f"bunq serve: cannot open {redact(args.backend)}: {exc}", file=sys.stderr)
        return 2
    _raise_fd_limit(config.max_connections + 256)
    server = Server(backend, config)
    try:
        asyncio.run(_serve(server, args.backend))
    except OSError as exc:  # the port is taken
        print(f"bunq serve: {exc}", file=sys.stderr)
        backend.close()
        return 1
    return 0
