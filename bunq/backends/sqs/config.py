"""``sqs://`` URLs and the mapping between bunq queue names and SQS queue names.

Forms (docs/sqs.md has the table)::

    sqs://sqs.eu-west-1.amazonaws.com/123456789012/emails     a queue URL without its scheme
    sqs://emails?region=eu-west-1                              a queue name (GetQueueUrl)
    sqs://?region=eu-west-1&prefix=prod-                       no home queue: names map by prefix

The queue in the URL is the *home* queue; every bunq queue ``name`` maps to
the SQS queue ``prefix + name`` in the same account and region (a ``.fifo``
suffix makes it a FIFO queue), so one backend serves several queues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ...errors import ConfigError
from ..urls import redact

SQS_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
AWS_HOST = re.compile(r"^(?:sqs\.)?([a-z]{2}(?:-[a-z]+)+-\d)\.(?:queue\.)?amazonaws\.com(?:\.cn)?$")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
_BOOL = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
_INTS = {"max_receives": (1, 1000), "lease_wait": (0, 20), "max_attempts": (1, 20),
         "pool": (1, 1000)}  # fmt: skip
_STRS = ("region", "endpoint", "dlq", "prefix", "profile")


@dataclass(frozen=True, slots=True)
class SqsConfig:
    """Where the queues live and how bunq talks to them.

    :param region: AWS region (default: the host's region, else boto3's own default).
    :param endpoint: endpoint override, e.g. ``http://127.0.0.1:5000`` (moto, LocalStack).
    :param home: SQS name of the queue named in the URL, if any.
    :param base_url: ``scheme://host/account`` when the URL gave it: sibling queue
        URLs are built from it instead of asking GetQueueUrl.
    :param prefix: prepended to bunq queue names to form SQS queue names.
    :param dlq: dead-letter queue (name or URL) for queues that have no RedrivePolicy.
    :param create: create missing queues (each with a ``<name>-dlq`` and a RedrivePolicy).
    :param max_receives: ``maxReceiveCount`` of the RedrivePolicy ``create`` writes.
    :param lease_wait: WaitTimeSeconds of the first receive of a lease (0: short poll).
    :param max_attempts: botocore standard-mode attempts per call (throttling, 5xx).
    :param pool: HTTP connections kept per backend.
    :param profile: AWS profile name.
    """

    region: str | None = None
    endpoint: str | None = None
    home: str | None = None
    base_url: str | None = None
    prefix: str = ""
    dlq: str | None = None
    create: bool = False
    max_receives: int = 10
    lease_wait: int = 0
    max_attempts: int = 4
    pool: int = 10
    profile: str | None = None

    def with_options(self, **kw: Any) -> SqsConfig:
        """Return a copy with keyword overrides (the ``from_url(**kw)`` ones)."""
        unknown = set(kw) - set(self.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown sqs:// options {sorted(unknown)}")
        return replace(self, **kw)


def parse_url(url: str) -> SqsConfig:
    """Parse an ``sqs://`` URL; ConfigError says what is wrong."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqs":
        raise ConfigError(f"not an sqs:// URL: {redact(url)!r}")
    opts = _options(parts.query)
    segments = [s for s in parts.path.split("/") if s]
    host = parts.netloc
    if not segments:  # sqs://<queue-name> or sqs://
        cfg = SqsConfig(home=host or None, **opts)
    elif len(segments) == 2:  # sqs://<host>/<account>/<queue>
        m = AWS_HOST.match(host.split(":")[0])
        local = host.split(":")[0] in LOCAL_HOSTS or host.startswith("[::1]")
        origin = f"{'http' if local else 'https'}://{host}"
        opts.setdefault("region", m.group(1) if m else None)
        opts.setdefault("endpoint", origin if local or not m else None)
        endpoint = opts.get("endpoint") or origin
        cfg = SqsConfig(home=segments[1], base_url=f"{endpoint.rstrip('/')}/{segments[0]}",
                        **opts)  # fmt: skip
        if not segments[0].isdigit():
            raise ConfigError(f"{redact(url)!r}: expected sqs://<host>/<account-id>/<queue>")
    else:
        raise ConfigError(f"{redact(url)!r}: expected sqs://<host>/<account-id>/<queue>, "
                          "sqs://<queue>?region=... or sqs://?region=...")  # fmt: skip
    if cfg.home is not None:
        _check_sqs_name(cfg.home)
        if not cfg.home.startswith(cfg.prefix):
            raise ConfigError(f"queue {cfg.home!r} in the URL does not start with "
                              f"prefix={cfg.prefix!r}")  # fmt: skip
    return cfg


def _options(query: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, values in parse_qs(query, keep_blank_values=True).items():
        value = values[-1]
        if key in _STRS:
            out[key] = value
        elif key == "create":
            if value.lower() not in _BOOL:
                raise ConfigError(f"sqs:// create={value!r}: use 1 or 0")
            out[key] = _BOOL[value.lower()]
        elif key in _INTS:
            lo, hi = _INTS[key]
            if not value.isdigit() or not lo <= int(value) <= hi:
                raise ConfigError(f"sqs:// {key}={value!r}: an integer in [{lo}, {hi}]")
            out[key] = int(value)
        else:
            known = sorted((*_STRS, "create", *_INTS))
            raise ConfigError(f"unknown sqs:// option {key!r}; known: {known}")
    return out


def _check_sqs_name(name: str) -> str:
    stem = name[:-5] if name.endswith(".fifo") else name
    if not SQS_NAME.match(stem) or len(name) > 80:
        raise ConfigError(f"SQS queue name {name!r}: at most 80 letters, digits, - and _, "
                          "optionally ending in .fifo")  # fmt: skip
    return name


def sqs_name(cfg: SqsConfig, queue: str) -> str:
    """Return the SQS queue name of bunq queue ``queue`` (ConfigError if it has none)."""
    name = cfg.prefix + queue
    try:
        return _check_sqs_name(name)
    except ConfigError:
        raise ConfigError(
            f"bunq queue {queue!r} cannot be an SQS queue name ({name!r}): SQS allows at most "
            "80 letters, digits, - and _ (and a .fifo suffix); ':' and '.' are not allowed"
        ) from None


def bunq_name(cfg: SqsConfig, name: str) -> str | None:
    """Return the bunq queue name of SQS queue ``name``, or None if outside the prefix."""
    return name[len(cfg.prefix) :] if name.startswith(cfg.prefix) and name != cfg.prefix else None


def name_of_url(url: str) -> str:
    """Return the queue name at the end of a queue URL."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def name_of_arn(arn: str) -> tuple[str, str]:
    """Return (account, queue name) of an SQS queue ARN."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ConfigError(f"not an SQS queue ARN: {arn!r}")
    return parts[4], parts[5]
