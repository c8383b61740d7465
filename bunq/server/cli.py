"""``bunq serve``: flags, defaults from :class:`bunq.settings.Settings`, run until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import signal
import sys
from typing import Any

from .. import logs
from ..backends import connect
from ..backends.base import Backend
from ..backends.urls import redact
from ..errors import BunqError, ConfigError
from ..settings import Settings
from ..validate import DEFAULT_MAX_PAYLOAD
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

GC_THRESHOLDS = (10_000, 50, 100)
"""The cyclic GC's thresholds in ``bunq serve``. Python's default first threshold (700
new containers) ran a collection every few frames of a PUSHB, over maps that are all
garbage or all kept by then: -6 to -8 % instructions per PUSHB job, -4 % per single PUSH
(``python bench/admission.py --instructions --only pushb``). A process of its own, so
the setting touches no one else's code."""


def tune_gc() -> None:
    """Move what start-up made (modules, classes, the backend) out of the collector's
    reach (``gc.freeze``: no full collection walks it again), then set the server's
    thresholds. Cycles are still collected, only in larger steps."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


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
    p.add_argument("--tls-cert", metavar="PEM", default=None,
                   help="serve TCP and HTTP over TLS with this certificate chain")  # fmt: skip
    p.add_argument("--tls-key", metavar="PEM", default=None,
                   help="the certificate's private key (if not in --tls-cert)")  # fmt: skip
    p.add_argument("--tls-client-ca", metavar="PEM", default=None,
                   help="require client certificates signed by these CAs (mutual TLS)")  # fmt: skip
    p.add_argument("--http-max-body", type=int, default=1 << 20, metavar="BYTES",
                   help="largest HTTP request body; more is refused with 413 (1 MiB)")  # fmt: skip
    p.add_argument("--cors", action="append", default=None, metavar="ORIGIN",
                   help="let web pages from ORIGIN call the HTTP API ('*': any); "
                   "repeatable; off by default")  # fmt: skip
    p.add_argument("--webhook-allow", action="append", default=None, metavar="CIDR",
                   help="let webhooks reach this network although the guard refuses it "
                   "(loopback, link-local, metadata); repeatable, e.g. 127.0.0.1/32")  # fmt: skip
    p.add_argument(
        "--max-payload",
        type=int,
        default=settings.max_payload,
        metavar="N",
        help="bytes of one job's encoded data or result the backend accepts "
        f"(BUNQ_MAX_PAYLOAD, {settings.max_payload}); not for sqs:// (its queue's limit)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="backend threads (default 1 for SQLite, inline for memory)",
    )
    p.add_argument("--log-level", default=settings.log_level, help="BUNQ_LOG_LEVEL (INFO)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logs (--log-level DEBUG)")
    p.add_argument("--json", action="store_true",
                   help="print where it listens as one JSON line instead of text")  # fmt: skip
    p.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        default=settings.log_format,
        help="BUNQ_LOG_FORMAT: auto (text on a terminal, else JSON), json, text",
    )
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
        tls=_tls(args),
        cors_origins=tuple(args.cors or ()),
        webhook_allow=tuple(args.webhook_allow or ()),
        http_max_body=args.http_max_body,
        threads=args.threads or (4 if str(args.backend).startswith(("postgres", "redis")) else 1),
    )


def _tls(args: argparse.Namespace) -> Any:
    if args.tls_cert is None:
        if args.tls_key or args.tls_client_ca:
            raise ConfigError("--tls-key and --tls-client-ca need --tls-cert")
        return None
    from ..tls import server_context

    return server_context(args.tls_cert, args.tls_key, args.tls_client_ca)


def _scheme(server: Server) -> str:
    return "bunq" if server.config.tls is None else "bunqs"


def payload_option(url: str, max_payload: int) -> dict[str, int]:
    """The backend option ``--max-payload`` becomes: the engine, SQL and Redis take it;
    SQS is bounded by its queue and a ``bunq://`` server by its own backend, so for them
    only the default is accepted (anything else is a ConfigError, never silently dropped)."""
    if url.split("://", 1)[0].lower() in ("memory", "sqlite", "postgres", "postgresql", "redis",
                                          "rediss"):  # fmt: skip
        return {"max_payload": max_payload}
    if max_payload != DEFAULT_MAX_PAYLOAD:
        raise ConfigError(f"--max-payload does not apply to {redact(url)}")
    return {}


def client_host(host: str) -> str:
    """The address a local client dials for a listener bound to ``host``."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


async def _serve(server: Server, url: str, as_json: bool = False) -> None:
    await server.start()
    tune_gc()
    done = asyncio.Event()  # signals are handled before anyone is told where we listen
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    host = server.config.host
    dial = f"{client_host(host)}:{server.port}"
    announce = getattr(server.ctx.backend, "announce", None)
    if callable(announce):  # the bunq command finds the server through the data file
        announce(serve=dial)
    if as_json:
        http_at = None if server.http_port is None else f"{host}:{server.http_port}"
        print(json.dumps({"listening": True, "tcp": f"{host}:{server.port}", "http": http_at,
                          "backend": redact(url), "client": f"{_scheme(server)}://{dial}"}),
              flush=True)  # fmt: skip
    else:
        http = f", http {host}:{server.http_port}" if server.http_port else ""
        print(f"bunq serve: listening on tcp {host}:{server.port}{http}, backend {redact(url)}",
              flush=True)  # fmt: skip
        print(f"bunq serve: inspect it with 'bunq stats --backend {_scheme(server)}://{dial}'; "
              "SIGTERM or Ctrl-C stops it", flush=True)  # fmt: skip
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


def main(argv: list[str] | None = None, settings: Settings | None = None) -> int:
    """Run ``bunq serve`` with ``argv``; return the exit code (0 after a graceful stop).

    :raises BunqError: a bad limit, or a backend that cannot be opened (``bunq`` maps
        it to its exit code; the message never shows the URL's password).
    """
    settings = settings or Settings.from_env()
    args = parser(settings).parse_args(argv)
    logs.setup("DEBUG" if args.verbose else args.log_level, args.log_format)
    args.backend = args.backend or settings.cli_backend()
    config = config_from(args, settings)
    try:
        backend: Backend = connect(args.backend, **payload_option(args.backend, args.max_payload))
    except BunqError as exc:
        exc.args = (f"cannot open {redact(args.backend)}: {exc}",)
        raise
    _raise_fd_limit(config.max_connections + 256)
    server = Server(backend, config)
    try:
        asyncio.run(_serve(server, args.backend, args.json))
    except OSError as exc:  # the port is taken
        print(f"bunq serve: {exc}", file=sys.stderr)
        backend.close()
        return 1
    return 0
