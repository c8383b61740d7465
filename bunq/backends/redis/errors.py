"""redis-py failures -> bunq's typed errors (BackendUnavailable, BackendError)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis import exceptions as rx

from ...errors import BackendError, BackendUnavailable


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Raise BackendUnavailable while Redis cannot be reached, BackendError otherwise."""
    try:
        yield
    except (rx.ConnectionError, rx.TimeoutError, rx.BusyLoadingError) as exc:
        raise BackendUnavailable(f"redis: {what}: cannot reach the server ({exc})") from exc
    except rx.RedisError as exc:
        raise BackendError(f"redis: {what}: {exc}") from exc
