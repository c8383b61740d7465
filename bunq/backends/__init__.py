"""Backends and ``connect(url)``: one URL scheme per backend.

| URL | backend |
| --- | --- |
| ``sqlite:///path/file.db`` | :class:`~bunq.backends.sql.sqlite.SQLiteBackend` (apsw) |
| ``postgresql://user@host/db`` | PostgresBackend (psycopg 3; extra ``postgres``) |
| ``memory://`` | the sharded memory engine (optionally ``?data=path``) |
| ``sqs://<queue-url>`` | SQSBackend (boto3; extra ``sqs``) |
| ``redis://host:6379/0?prefix=bunq`` | RedisBackend (extra ``redis``; ``rediss://``: TLS) |
| ``bunq://host:port`` | RemoteBackend, a client of ``bunq serve`` (``bunqs://``: TLS) |

Each call opens a new, independent backend; share one by passing the object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigError, MissingDependency
from .base import Backend, Capability, DlqConfig, QueueLimits, SweepResult
from .urls import redact

__all__ = ["Backend", "Capability", "DlqConfig", "QueueLimits", "SweepResult", "connect",
           "register_scheme"]  # fmt: skip

_SCHEMES: dict[str, Callable[..., Backend]] = {}


def register_scheme(scheme: str, opener: Callable[..., Backend]) -> None:
    """Register ``opener(url, **kw) -> Backend`` for a URL scheme."""
    _SCHEMES[scheme] = opener


def _sqlite(url: str, **kw: Any) -> Backend:
    from .sql.sqlite import SQLiteBackend

    return SQLiteBackend.from_url(url, **kw)


def _lazy(module: str, cls: str, extra: str) -> Callable[..., Backend]:
    def open_(url: str, **kw: Any) -> Backend:
        import importlib

        try:
            mod = importlib.import_module(module, __name__)
        except ModuleNotFoundError as exc:
            if not extra or (exc.name or "").split(".")[0] == "bunq":
                raise  # a bug in bunq itself, not a missing extra
            scheme = url.split(":", 1)[0]
            raise MissingDependency(f"{scheme}://", extra, exc.name or "?") from None
        backend: Backend = getattr(mod, cls).from_url(url, **kw)
        return backend

    return open_


register_scheme("sqlite", _sqlite)
register_scheme("postgresql", _lazy(".sql.postgres", "PostgresBackend", "postgres"))
register_scheme("postgres", _lazy(".sql.postgres", "PostgresBackend", "postgres"))
register_scheme("memory", _lazy(".embedded", "EmbeddedBackend", ""))
register_scheme("sqs", _lazy(".sqs", "SQSBackend", "sqs"))
register_scheme("redis", _lazy(".redis", "RedisBackend", "redis"))
register_scheme("rediss", _lazy(".redis", "RedisBackend", "redis"))
register_scheme("bunq", _lazy(".remote", "RemoteBackend", ""))
register_scheme("bunqs", _lazy(".remote", "RemoteBackend", ""))


def connect(url: str | None = None, **kw: Any) -> Backend:
    """Open the backend a URL names (default: ``BUNQ_BACKEND``, else ``sqlite:///bunq.db``).

    :raises ConfigError: unknown scheme, malformed URL, or a missing extra.
    """
    if url is None:
        from ..settings import Settings

        url = Settings.from_env().library_backend()
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(f"backend URL {redact(url)!r} must look like scheme://...")
    scheme = url.split("://", 1)[0].lower()
    opener = _SCHEMES.get(scheme)
    if opener is None:
        raise ConfigError(f"unknown backend scheme {scheme!r}; known: {sorted(_SCHEMES)}")
    return opener(url, **kw)


def resolve(backend: Backend | str | None) -> tuple[Backend, bool]:
    """Return (backend, owned): a URL is opened (and owned by the caller)."""
    if backend is None or isinstance(backend, str):
        return connect(backend), True
    if not isinstance(backend, Backend):
        raise ConfigError(f"expected a backend URL or Backend, got {type(backend).__name__}")
    return backend, False
