"""Configuration: the one place that reads ``BUNQ_*`` environment variables.

``Settings.from_env()`` is called once by an entry point (CLI, handler,
server) and the result is passed down; nothing else reads the environment
(``bunq._core`` reads ``BUNQ_PUREPYTHON`` / ``BUNQ_REQUIRE_COMPILED`` to pick
its implementation before anything else exists).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .errors import ConfigError
from .protocol import DEFAULT_MAX_FRAME, PRE_AUTH_FRAME
from .validate import DEFAULT_MAX_PAYLOAD

DEFAULT_BACKEND = "sqlite:///bunq.db"  # the library's default (``bunq.connect()``)
LOG_FORMATS = ("auto", "json", "text")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_BOOLS = {"1": True, "true": True, "yes": True, "on": True,
          "0": False, "false": False, "no": False, "off": False}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Settings:
    """Every knob bunq reads from the environment, with its default.

    | variable | field | default |
    | --- | --- | --- |
    | BUNQ_BACKEND | backend | unset: ``connect()`` opens ``sqlite:///bunq.db``; the ``bunq``
      command opens :meth:`cli_backend` |
    | BUNQ_BACKEND_SECRET | backend_secret | none: where the handlers read the backend URL
      (a Secrets Manager ARN/name, or ``ssm:/param/name``) when BUNQ_BACKEND is unset |
    | BUNQ_HOST | host | ``127.0.0.1`` |
    | BUNQ_TCP_PORT | tcp_port | 6789 |
    | BUNQ_HTTP_PORT | http_port | 6790 (0 picks one, -1 disables HTTP) |
    | BUNQ_DATA_PATH | data_path | ``bunq-data.db`` (server write-behind file) |
    | BUNQ_AUTH_TOKENS | auth_tokens | none (comma separated) |
    | BUNQ_MAX_PAYLOAD | max_payload | 10 MiB (bytes of encoded job data; ``bunq serve`` |
      passes it to its backend) |
    | BUNQ_LEASE_MS | lease_ms | 30000 |
    | BUNQ_HANDLER | handler | none (``module:function``) |
    | BUNQ_QUEUE | queue | none |
    | BUNQ_LOG_LEVEL | log_level | ``INFO`` |
    | BUNQ_LOG_FORMAT | log_format | ``auto`` (text on a terminal, JSON elsewhere), json, text |
    | BUNQ_MAX_FRAME | max_frame | 64 MiB (bytes of one protocol frame, after Auth) |
    | BUNQ_IDLE_TIMEOUT | idle_timeout | 60 (s before an idle client is closed) |
    | BUNQ_PRE_AUTH_FRAME | pre_auth_frame | 4096 (bytes of a frame before Auth) |
    | BUNQ_MAX_CONNECTIONS | max_connections | 10000 (open TCP connections) |
    | BUNQ_MAX_UNAUTHENTICATED | max_unauthenticated | 1024 (connections not yet authed) |
    | BUNQ_AUTH_TIMEOUT | auth_timeout | 10 (s a connection has to authenticate) |
    | BUNQ_MAX_AUTH_FAILURES | max_auth_failures | 5 (wrong tokens before a close) |
    | BUNQ_AUTH_FAIL_DELAY | auth_fail_delay | 0.2 (s before a wrong token is answered) |
    | BUNQ_MAX_INFLIGHT | max_inflight | 100 (requests served at once per connection) |
    | BUNQ_MAX_UNSENT | max_unsent | 4 MiB (unread replies before reading stops) |
    | BUNQ_HTTP_AUTH | http_auth | true (tokens guard /metrics and /stats) |
    | BUNQ_SCRAPE_CACHE | scrape_cache | 1.0 (s a /metrics or /stats answer is reused) |
    """

    backend: str | None = None
    backend_secret: str | None = None
    host: str = "127.0.0.1"
    tcp_port: int = 6789
    http_port: int = 6790
    data_path: str = "bunq-data.db"
    auth_tokens: tuple[str, ...] = ()
    max_payload: int = DEFAULT_MAX_PAYLOAD
    lease_ms: int = 30_000
    handler: str | None = None
    queue: str | None = None
    log_level: str = "INFO"
    log_format: str = "auto"
    max_frame: int = DEFAULT_MAX_FRAME
    idle_timeout: int = 60
    pre_auth_frame: int = PRE_AUTH_FRAME
    max_connections: int = 10_000
    max_unauthenticated: int = 1_024
    auth_timeout: float = 10.0
    max_auth_failures: int = 5
    auth_fail_delay: float = 0.2
    max_inflight: int = 100
    max_unsent: int = 4 << 20
    http_auth: bool = True
    scrape_cache: float = 1.0

    def library_backend(self) -> str:
        """What ``bunq.connect()`` opens: ``BUNQ_BACKEND``, else ``sqlite:///bunq.db``."""
        return self.backend or DEFAULT_BACKEND

    def cli_backend(self) -> str:
        """What ``bunq serve`` serves and every other ``bunq`` command reads by default:
        ``BUNQ_BACKEND``, else the memory engine with its data in ``BUNQ_DATA_PATH``."""
        return self.backend or f"memory://?data={self.data_path}"

    def __post_init__(self) -> None:
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(
                f"BUNQ_LOG_FORMAT must be one of {LOG_FORMATS}, got {self.log_format!r}"
            )
        if self.log_level.upper() not in LOG_LEVELS:
            raise ConfigError(f"BUNQ_LOG_LEVEL must be one of {LOG_LEVELS}, got {self.log_level!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read ``BUNQ_*`` variables (``env`` defaults to ``os.environ``)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"BUNQ_{f.name.upper()}")
            if raw is None or raw == "":
                continue
            values[f.name] = _coerce(f.name, raw, f.type)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _coerce(name: str, raw: str, typ: object) -> Any:
    if typ in ("int", int):
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"BUNQ_{name.upper()} must be an integer, got {raw!r}") from None
        least = -1 if name == "http_port" else 0  # BUNQ_HTTP_PORT=-1: no HTTP listener
        if value < least:
            raise ConfigError(f"BUNQ_{name.upper()} must be >= {least}, got {value}")
        return value
    if typ in ("float", float):
        try:
            number = float(raw)
        except ValueError:
            raise ConfigError(f"BUNQ_{name.upper()} must be a number, got {raw!r}") from None
        if not number >= 0 or number == float("inf"):
            raise ConfigError(f"BUNQ_{name.upper()} must be a finite number >= 0, got {raw!r}")
        return number
    if typ in ("bool", bool):
        flag = raw.strip().lower()
        if flag not in _BOOLS:
            raise ConfigError(f"BUNQ_{name.upper()} must be one of {sorted(_BOOLS)}, got {raw!r}")
        return _BOOLS[flag]
    if "tuple" in str(typ):
        return tuple(t.strip() for t in raw.split(",") if t.strip())
    return raw
