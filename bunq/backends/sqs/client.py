"""boto3 at the boundary: one client, errors translated once, queues resolved and cached.

botocore's ``standard`` retry mode retries throttling and 5xx answers
(``max_attempts`` per call, exponential backoff with jitter); what is still
failing after that becomes :class:`~bunq.errors.BackendUnavailable`. No
botocore exception leaves this package.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)

from ...errors import BackendError, BackendUnavailable, BunqError, ConfigError, ValidationError
from .config import SqsConfig, bunq_name, name_of_arn, name_of_url, sqs_name

THROTTLING = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled",
    "RequestThrottledException", "TooManyRequestsException", "RequestLimitExceeded",
    "SlowDown", "OverLimit", "KmsThrottled", "ServiceUnavailable", "InternalError",
    "InternalFailure", "RequestTimeout", "RequestTimeoutException",
})  # fmt: skip
STALE = frozenset({"ReceiptHandleIsInvalid", "MessageNotInflight", "InvalidReceiptHandle"})
MISSING = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})
INVALID = frozenset({
    "InvalidParameterValue", "InvalidMessageContents", "MessageTooLong", "InvalidAttributeName",
    "InvalidAttributeValue", "MissingParameter", "InvalidBatchEntryId", "EmptyBatchRequest",
    "TooManyEntriesInBatchRequest", "BatchEntryIdsNotDistinct", "BatchRequestTooLong",
    "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "InvalidParameterCombination",
    "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation",
})  # fmt: skip
INFO_TTL_S = 300.0  # queue attributes (size limit, redrive) are re-read this often


class Stale(Exception):  # internal signal, never leaves the package
    """SQS refused a receipt handle: the lease's fence no longer matches."""


def api_name(op: str) -> str:
    """Return the SQS API name of a client method (``receive_message`` -> ``ReceiveMessage``)."""
    return "".join(part.title() for part in op.split("_"))


def error_code(exc: ClientError) -> str:
    err = exc.response.get("Error", {})
    return str(err.get("QueryErrorCode") or err.get("Code") or "")


def translate(exc: Exception, what: str) -> BunqError:
    """Return the bunq error for a botocore failure of ``what``."""
    if isinstance(exc, ClientError):
        err, meta = exc.response.get("Error", {}), exc.response.get("ResponseMetadata", {})
        code, status = error_code(exc), int(meta.get("HTTPStatusCode") or 0)
        data = {"code": code, "status": status, "retries": meta.get("RetryAttempts", 0)}
        msg = f"SQS {what}: {err.get('Code', code)}: {err.get('Message', '')}"
        if status >= 500 or code in THROTTLING or err.get("Code") in THROTTLING:
            return BackendUnavailable(f"{msg} (after {data['retries']} retries)", **data)
        if code in MISSING or err.get("Code") in MISSING:
            return ConfigError(f"{msg}; create the queue (template.yaml) or pass create=1", **data)
        if code in INVALID or err.get("Code") in INVALID:
            return ValidationError(msg, **data)
        return BackendError(msg, **data)
    if isinstance(exc, (BotoConnectionError, HTTPClientError)):
        return BackendUnavailable(f"SQS {what}: {exc}")
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError, NoRegionError)):
        return ConfigError(f"SQS {what}: {exc} (set AWS credentials and region=...)")
    if isinstance(exc, ParamValidationError):
        return ValidationError(f"SQS {what}: {exc}")
    return BackendError(f"SQS {what}: {exc}")


@contextmanager
def translate_errors(what: str) -> Iterator[None]:
    """Turn every botocore error raised inside into a bunq error (``from`` the original)."""
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise translate(exc, what) from exc


_SESSIONS: dict[str | None, Any] = {}
_SESSIONS_LOCK = threading.Lock()


def make_client(cfg: SqsConfig) -> Any:
    """Build the boto3 SQS client: standard retries, read timeout above the 20 s long poll.

    Sessions are shared per profile (a client from a warm session takes ~4 ms,
    from a fresh one ~40 ms); boto3 sessions are not thread-safe, hence the lock.
    """
    with translate_errors("client setup"), _SESSIONS_LOCK:
        session = _SESSIONS.get(cfg.profile)
        if session is None:
            session = _SESSIONS[cfg.profile] = boto3.session.Session(profile_name=cfg.profile)
        config = Config(retries={"mode": "standard", "total_max_attempts": cfg.max_attempts},
                        connect_timeout=5, read_timeout=30, max_pool_connections=cfg.pool,
                        tcp_keepalive=True)  # fmt: skip
        return session.client("sqs", region_name=cfg.region, endpoint_url=cfg.endpoint,
                              config=config)  # fmt: skip


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """One SQS queue as bunq uses it (attributes cached for ``INFO_TTL_S``)."""

    queue: str  # bunq name
    name: str  # SQS name
    url: str
    arn: str
    fifo: bool
    max_size: int
    retention_s: int
    visibility_s: int
    max_receives: int | None  # RedrivePolicy maxReceiveCount
    dlq_url: str | None
    dlq_fifo: bool
    read_at: float


class Api:
    """The client, a translating ``call``, and the queue resolver."""

    def __init__(self, cfg: SqsConfig, client: Any | None = None) -> None:
        self.cfg = cfg
        self.client = client if client is not None else make_client(cfg)
        self._lock = threading.Lock()
        self._infos: dict[str, QueueInfo] = {}
        self._urls: dict[str, str] = {}

    def call(self, op: str, what: str = "", *, stale: bool = False, **params: Any) -> Any:
        """Call client method ``op`` with error translation; ``stale``: raise Stale on STALE."""
        try:
            return getattr(self.client, op)(**params)
        except ClientError as exc:
            if stale and error_code(exc) in STALE:
                raise Stale(error_code(exc)) from None
            raise translate(exc, f"{api_name(op)} {what}".strip()) from exc
        except BotoCoreError as exc:
            raise translate(exc, f"{api_name(op)} {what}".strip()) from exc

    # -- queues -----------------------------------------------------------------------
    def info(self, queue: str) -> QueueInfo:
        """Return the queue's info, resolving (and creating, with ``create``) it."""
        info = self._infos.get(queue)
        if info is not None and time.monotonic() - info.read_at < INFO_TTL_S:
            return info
        name = sqs_name(self.cfg, queue)
        url = self.url_of(name, create=self.cfg.create)
        attrs = self.call("get_queue_attributes", name, QueueUrl=url,
                          AttributeNames=["All"])["Attributes"]  # fmt: skip
        dlq_url, max_receives = self._redrive(attrs)
        info = QueueInfo(queue, name, url, attrs.get("QueueArn", ""), name.endswith(".fifo"),
                         int(attrs.get("MaximumMessageSize", 262_144)),
                         int(attrs.get("MessageRetentionPeriod", 345_600)),
                         int(attrs.get("VisibilityTimeout", 30)), max_receives, dlq_url,
                         bool(dlq_url and name_of_url(dlq_url).endswith(".fifo")),
                         time.monotonic())  # fmt: skip
        with self._lock:
            self._infos[queue] = info
        return info

    def forget(self, queue: str) -> None:
        with self._lock:
            info = self._infos.pop(queue, None)
            if info is not None:
                self._urls.pop(info.name, None)

    def _redrive(self, attrs: dict[str, str]) -> tuple[str | None, int | None]:
        policy = attrs.get("RedrivePolicy")
        if policy:
            doc = json.loads(policy)
            account, name = name_of_arn(doc["deadLetterTargetArn"])
            return self.url_of(name, account=account), int(doc["maxReceiveCount"])
        if self.cfg.dlq:
            dlq = self.cfg.dlq
            return (dlq if "://" in dlq else self.url_of(dlq)), None
        return None, None

    def url_of(self, name: str, *, create: bool = False, account: str | None = None) -> str:
        """Return the URL of SQS queue ``name`` (built, cached, looked up or created)."""
        url = self._urls.get(name)
        if url is not None:
            return url
        if self.cfg.base_url and not create and account in (None, self._account()):
            url = f"{self.cfg.base_url}/{name}"
        else:
            url = self._lookup(name, create, account)
        with self._lock:
            self._urls[name] = url
        return url

    def _account(self) -> str | None:
        return self.cfg.base_url.rsplit("/", 1)[-1] if self.cfg.base_url else None

    def _lookup(self, name: str, create: bool, account: str | None) -> str:
        params = {"QueueName": name} if account is None else \
            {"QueueName": name, "QueueOwnerAWSAccountId": account}  # fmt: skip
        try:
            return str(self.client.get_queue_url(**params)["QueueUrl"])
        except ClientError as exc:
            if not (create and error_code(exc) in MISSING):
                raise translate(exc, f"GetQueueUrl {name}") from exc
        except BotoCoreError as exc:
            raise translate(exc, f"GetQueueUrl {name}") from exc
        return self.create(name)

    def create(self, name: str) -> str:
        """Create SQS queue ``name`` with a ``<name>-dlq`` and a RedrivePolicy to it."""
        fifo = name.endswith(".fifo")
        stem = name[:-5] if fifo else name
        attrs = {"FifoQueue": "true"} if fifo else {}
        dlq_name = f"{stem}-dlq{'.fifo' if fifo else ''}"
        dlq_url = self.call(
            "create_queue",
            dlq_name,
            QueueName=dlq_name,
            Attributes={**attrs, "MessageRetentionPeriod": "1209600"},
        )["QueueUrl"]
        arn = self.call("get_queue_attributes", dlq_name, QueueUrl=dlq_url,
                        AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]  # fmt: skip
        policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": self.cfg.max_receives})
        attrs["RedrivePolicy"] = policy
        return str(self.call("create_queue", name, QueueName=name, Attributes=attrs)["QueueUrl"])

    def list_queues(self) -> list[str]:
        """Return the SQS queue names under the prefix."""
        names: list[str] = []
        params: dict[str, Any] = {"MaxResults": 1000}
        if self.cfg.prefix:
            params["QueueNamePrefix"] = self.cfg.prefix
        while True:
            page = self.call("list_queues", **params)
            names += [name_of_url(u) for u in page.get("QueueUrls", [])]
            if not page.get("NextToken"):
                return names
            params["NextToken"] = page["NextToken"]

    def bunq_queues(self) -> list[str]:
        """Return bunq queue names, leaving out the queues that are others' DLQs."""
        names = self.list_queues()
        dlqs: set[str] = set()
        for name in names:
            queue = bunq_name(self.cfg, name)
            if queue is None:
                continue
            try:
                info = self.info(queue)
            except (ConfigError, ValidationError):
                continue
            if info.dlq_url:
                dlqs.add(name_of_url(info.dlq_url))
        return sorted(q for n in names if n not in dlqs and (q := bunq_name(self.cfg, n)))
