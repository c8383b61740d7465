"""redis-py failures -> bunq's typed errors (BackendUnavailable, BackendError)."""

from __future__ import annotations

from types import TracebackType

from redis import exceptions as rx

from ...errors import BackendError, BackendUnavailable

_UNREACHABLE = (rx.ConnectionError, rx.TimeoutError, rx.BusyLoadingError)


class translated:
    """``with translated("add"):`` raises BackendUnavailable while Redis cannot be
    reached, BackendError for any other redis-py error (a class, not a generator
    context manager: it is entered on every call of the hot paths)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, tp: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        if isinstance(exc, _UNREACHABLE):
            what = f"redis: {self.what}: cannot reach the server ({exc})"
            raise BackendUnavailable(what) from exc
        if isinstance(exc, rx.RedisError):
            raise BackendError(f"redis: {self.what}: {exc}") from exc
