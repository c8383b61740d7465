"""``redis://`` and ``rediss://`` URLs: the client options and bunq's own.

``redis://[user:password@]host:port/db?prefix=bunq&replicas=0&wait_timeout=1000``;
``rediss://`` adds TLS, with redis-py's ``ssl_cert_reqs``, ``ssl_ca_certs``,
``ssl_certfile``, ``ssl_keyfile`` and ``ssl_check_hostname`` options in the query.
Everything else in the query goes to redis-py (``socket_timeout``, ``health_check_interval`` ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ...errors import ConfigError

PREFIX = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
CLIENT_OPTIONS = {
    "socket_timeout", "socket_connect_timeout", "health_check_interval", "client_name",
    "max_connections", "ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile",
    "ssl_check_hostname", "ssl_ca_path", "ssl_min_version", "protocol", "retry_on_timeout",
}  # fmt: skip


@dataclass(frozen=True)
class RedisConfig:
    """What a URL asks for.

    :param client_url: the URL handed to redis-py (bunq's own options removed).
    :param prefix: the first part of every key (``{prefix:queue}`` hash tags).
    :param replicas: ``durable=True`` adds wait for this many replicas (``WAIT``).
    :param wait_timeout: ms a durable add waits for replicas / the AOF fsync.
    """

    client_url: str
    prefix: str = "bunq"
    replicas: int = 0
    wait_timeout: int = 1000
    client_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, url: str) -> RedisConfig:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss") or not parts.hostname:
            raise ConfigError(f"redis URL {url!r} must look like redis://host:port/db")
        try:
            parts.port  # noqa: B018 - validates the port
        except ValueError as exc:
            raise ConfigError(f"redis URL {url!r}: {exc}") from None
        db = parts.path.strip("/") or "0"
        if not db.isdigit():
            raise ConfigError(f"redis URL {url!r}: the path must be a database number")
        own: dict[str, str] = {}
        rest: list[tuple[str, str]] = []
        for k, v in parse_qsl(parts.query, keep_blank_values=True):
            if k in ("prefix", "replicas", "wait_timeout"):
                own[k] = v
            elif k in CLIENT_OPTIONS:
                rest.append((k, v))
            else:
                raise ConfigError(f"redis URL {url!r}: unknown option {k!r}")
        prefix = own.get("prefix", "bunq")
        if not PREFIX.match(prefix):
            raise ConfigError(f"redis prefix {prefix!r}: 1-64 chars of letters, digits, _ . -")
        client_url = urlunsplit((parts.scheme, parts.netloc, f"/{db}", urlencode(rest), ""))
        return cls(client_url, prefix, _int(url, own, "replicas", 0),
                   _int(url, own, "wait_timeout", 1000))  # fmt: skip


def _int(url: str, own: dict[str, str], name: str, default: int) -> int:
    raw = own.get(name)
    if raw is None:
        return default
    if not raw.isdigit():
        raise ConfigError(f"redis URL {url!r}: {name} must be a non-negative integer")
    return int(raw)
