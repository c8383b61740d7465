"""Every error bunq raises on purpose, each with a stable wire code.

Codes are ``snake_case`` and never change once released: the server sends
``{"code": err.code, "message": str(err), "data": err.data}`` and the client
rebuilds the same class through :meth:`BunqError.from_wire`.

Control-flow signals raised by job handlers (:class:`Retry`,
:class:`DelayedError`, :class:`UnrecoverableError`) deliberately do not derive
from :class:`BunqError`, so ``except BunqError`` in user code cannot swallow
them.
"""

from __future__ import annotations

from typing import Any, ClassVar


class BunqError(Exception):
    """Base class for every error bunq raises on purpose."""

    code: ClassVar[str] = "bunq_error"
    _by_code: ClassVar[dict[str, type[BunqError]]] = {}

    def __init__(self, message: str = "", **data: Any) -> None:
        super().__init__(message or self.__class__.__doc__ or self.code)
        self.data: dict[str, Any] = data

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        # A subclass that forgets its own `code` inherits its parent's and is
        # refused here, at import time.
        if cls.code in BunqError._by_code:
            raise TypeError(f"duplicate error code {cls.code!r} on {cls.__name__}")
        BunqError._by_code[cls.code] = cls

    def to_wire(self) -> dict[str, Any]:
        """Return the error as the wire payload ``{code, message, data}``."""
        return {"code": self.code, "message": str(self), "data": self.data}

    @classmethod
    def from_wire(cls, payload: dict[str, Any] | str) -> BunqError:
        """Rebuild an error from its wire payload (unknown codes give BunqError)."""
        if isinstance(payload, str):
            return BunqError(payload)
        kind = cls._by_code.get(str(payload.get("code")), BunqError)
        data = payload.get("data") or {}
        err = kind.__new__(kind)
        BunqError.__init__(err, str(payload.get("message", "")), **data)
        return err


BunqError._by_code[BunqError.code] = BunqError


class ConfigError(BunqError, ValueError):
    """Invalid configuration, URL, option or argument."""

    code = "config"


class MissingDependency(ConfigError):
    """An optional dependency is not installed; ``data['extra']`` names the extra to add."""

    code = "missing_dependency"

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs the '{extra}' extra ({module} is not installed): "
            f"pip install 'bunq-queue[{extra}]'",
            feature=feature,
            extra=extra,
            module=module,
        )


class ValidationError(BunqError, ValueError):
    """A job or request failed validation (bad type, unknown option, too large)."""

    code = "validation"


class PayloadTooLarge(ValidationError):
    """A job payload exceeds the backend's size limit."""

    code = "payload_too_large"


class JobNotFound(BunqError, LookupError):
    """No job with that id (it may have been removed or cleaned)."""

    code = "job_not_found"


class DetachedJob(BunqError):
    """A method of a Job that was not read through a Queue (a backend's or a lease's
    own Job carries no Queue); ``data["method"]`` names the Queue method to call."""

    code = "detached_job"


class DuplicateJob(BunqError):
    """A live job already holds that job id or unique key (strategy reject)."""

    code = "duplicate_job"


class GroupFull(BunqError):
    """A job's FIFO group already holds ``group_max_size`` waiting or delayed jobs;
    ``data`` names the group and the bound. Nothing of the add was admitted."""

    code = "group_full"


def group_full(group: str, max_size: int) -> GroupFull:
    """The error of an add over ``group_max_size`` (bunqueue's message)."""
    return GroupFull(f"Group {group} has reached its maximum size of {max_size}",
                     group=group, max=max_size)  # fmt: skip


class JobStateError(BunqError):
    """The job is not in a state the operation accepts; ``data`` names the job, its state
    and the operation (removing an active job, promoting one that is not delayed...)."""

    code = "job_state"

    def __init__(self, job_id: str = "", state: str = "", operation: str = "",
                 message: str = "") -> None:  # fmt: skip
        msg = message or f"cannot {operation} job {job_id!r}: it is {state}"
        super().__init__(msg, job_id=job_id, state=state, operation=operation)


class JobFailed(BunqError):
    """``wait()``: the job was dead-lettered; ``data`` names the job, the reason and its
    last error."""

    code = "job_failed"


class JobCancelled(BunqError):
    """``wait()``: the job was cancelled (``queue.cancel``); ``data['job_id']`` names it."""

    code = "job_cancelled"


class WaitTimeout(BunqError, TimeoutError):
    """``wait()``: the job did not finish within the timeout; ``data`` names it and its
    state when the wait gave up."""

    code = "wait_timeout"


class DependencyError(BunqError, ValueError):
    """A flow or dependency list is invalid (cycle, unknown dependency)."""

    code = "dependency"


class LeaseLost(BunqError):
    """The lease's fence no longer matches: another owner has the job."""

    code = "lease_lost"


class RateLimited(BunqError):
    """A limit refused the request; ``data['retry_after']`` says when to retry (s)."""

    code = "rate_limited"


class UnsupportedError(BunqError, NotImplementedError):
    """The backend cannot honour this feature; ``data`` names backend and feature."""

    code = "unsupported"

    def __init__(self, backend: str = "", feature: str = "", message: str = "") -> None:
        msg = message or f"backend {backend!r} does not support {feature}"
        super().__init__(msg, backend=backend, feature=feature)


class BackendError(BunqError):
    """The backend failed; ``__cause__`` holds the driver error."""

    code = "backend"


class BackendUnavailable(BackendError):
    """The backend could not be reached or stayed busy past its retries."""

    code = "backend_unavailable"


class DataFileLocked(BackendError):
    """Another process owns the data file; ``data['owner']`` names it."""

    code = "data_file_locked"


class ProtocolError(BunqError):
    """A frame or message broke the wire protocol."""

    code = "protocol"


class AuthError(BunqError):
    """Authentication is required or the token was refused."""

    code = "auth"


class WebhookNotFound(BunqError, LookupError):
    """No webhook has this id (``data['webhook_id']``)."""

    code = "webhook_not_found"


class WebhookTargetRefused(ValidationError):
    """The target guard refused a webhook URL: its host is, or resolves to, an address
    webhooks may not reach (link-local, cloud metadata, loopback...); ``data['address']``."""

    code = "webhook_target_refused"


class WebhookSignatureError(BunqError, ValueError):
    """A webhook delivery's signature is missing, stale or wrong (``data['reason']``)."""

    code = "webhook_signature"


class Retry(Exception):  # a signal, not an error
    """Raised by a handler to ask for another attempt (spends an attempt).

    :param delay_ms: wait this long before the next attempt instead of the backoff.
    """

    def __init__(self, message: str = "retry requested", delay_ms: int | None = None) -> None:
        super().__init__(message)
        self.delay_ms = delay_ms


class DelayedError(Exception):
    """Raised by a handler to reschedule the job without spending an attempt.

    :param delay_ms: how long to wait before the job runs again.
    """

    def __init__(self, delay_ms: int = 1000, message: str = "delayed by handler") -> None:
        super().__init__(message)
        self.delay_ms = delay_ms


class UnrecoverableError(Exception):
    """Raised by a handler to send the job straight to the dead-letter queue."""
