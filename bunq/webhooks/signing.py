"""Signing and verifying webhook deliveries (HMAC-SHA256 over ``timestamp + "." + body``).

Every delivery carries::

    X-Webhook-Timestamp: 1764610000123            (epoch milliseconds, when it was signed)
    X-Webhook-Signature: v1=<hex hmac_sha256(secret, "<timestamp>.<body>")>

Signing the timestamp with the body lets a receiver refuse a replayed request:
:func:`verify` checks the signature in constant time and that the timestamp is
within ``tolerance_s`` of its clock. Retries are signed again with a new timestamp.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

from ..errors import WebhookSignatureError

TIMESTAMP_HEADER = "X-Webhook-Timestamp"
SIGNATURE_HEADER = "X-Webhook-Signature"
SCHEME = "v1"


def signature(secret: str, timestamp_ms: int, body: bytes) -> str:
    """Return the ``X-Webhook-Signature`` value for ``body`` signed at ``timestamp_ms``."""
    mac = hmac.new(secret.encode(), f"{timestamp_ms}.".encode() + body, hashlib.sha256)
    return f"{SCHEME}={mac.hexdigest()}"


def sign(secret: str, body: bytes, timestamp_ms: int | None = None) -> dict[str, str]:
    """Return the two signature headers for ``body`` (``timestamp_ms``: default now)."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return {TIMESTAMP_HEADER: str(ts), SIGNATURE_HEADER: signature(secret, ts, body)}


def verify(secret: str, headers: Mapping[str, str], body: bytes,
           tolerance_s: float = 300.0, now_ms: int | None = None) -> int:  # fmt: skip
    """Check a delivery's signature; return its timestamp (epoch ms).

    ``headers``: the request's headers (any case: a dict, ``http.client`` or
    ``email.message`` headers); ``body``: the raw bytes as received. Raises
    :class:`~bunq.errors.WebhookSignatureError` (``data['reason']``: ``missing``,
    ``malformed``, ``stale`` or ``mismatch``).
    """
    got_ts, got_sig = _header(headers, TIMESTAMP_HEADER), _header(headers, SIGNATURE_HEADER)
    if got_ts is None or got_sig is None:
        raise WebhookSignatureError("the delivery is not signed", reason="missing")
    try:
        ts = int(got_ts)
    except ValueError:
        raise WebhookSignatureError("bad timestamp header", reason="malformed") from None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if abs(now - ts) > tolerance_s * 1000:
        raise WebhookSignatureError(f"signed {abs(now - ts)} ms from now, past the tolerance",
                                    reason="stale")  # fmt: skip
    candidates = [p.strip() for p in got_sig.split(",")]  # room for a rotated second key
    want = signature(secret, ts, body)
    if not any(hmac.compare_digest(c.encode(), want.encode()) for c in candidates):
        raise WebhookSignatureError("signature does not match", reason="mismatch")
    return ts


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        low = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == low), None)
    return value
