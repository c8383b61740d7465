"""Rows of the write-behind file: the schema and record <-> row conversion.

The file is for recovery only (nothing queries it), so a job is one row:
``id, queue, state`` in columns, the payload and options as stored, every
mutable field packed into one msgpack ``meta`` list, and the result.
Options objects are shared between jobs, so their encoding is cached by
identity (holding the object, so the id cannot be reused while cached).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..codec import options_from_blob, pack, setting_blob, setting_from_blob, unpack
from ..job import Attempt, FailureReason, JobState
from ..queueconfig import DlqConfig, QueueLimits
from .record import Rec

SCHEMA_VERSION = 1

DDL = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, queue TEXT NOT NULL,"
    " state TEXT NOT NULL, data BLOB NOT NULL, opts BLOB NOT NULL, meta BLOB NOT NULL,"
    " result BLOB)",
    "CREATE TABLE IF NOT EXISTS uniq (queue TEXT NOT NULL, key TEXT NOT NULL,"
    " job_id TEXT NOT NULL, until INTEGER, PRIMARY KEY (queue, key))",
    "CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY, paused INTEGER NOT NULL,"
    " limits BLOB, dlq BLOB)",
    "CREATE TABLE IF NOT EXISTS kv (ns TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,"
    " PRIMARY KEY (ns, key))",
)

INSERT_JOB = "INSERT OR REPLACE INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?)"
UPDATE_JOB = "UPDATE jobs SET state = ?, meta = ?, result = ? WHERE id = ?"
DELETE_JOB = "DELETE FROM jobs WHERE id = ?"
PUT_UNIQ = "INSERT OR REPLACE INTO uniq VALUES (?, ?, ?, ?)"
DELETE_UNIQ = "DELETE FROM uniq WHERE queue = ? AND key = ?"
PUT_QUEUE = "INSERT OR REPLACE INTO queues VALUES (?, ?, ?, ?)"
DELETE_QUEUE = "DELETE FROM queues WHERE name = ?"
PUT_KV = "INSERT OR REPLACE INTO kv VALUES (?, ?, ?)"
DELETE_KV = "DELETE FROM kv WHERE ns = ? AND key = ?"

_STATES = {s.value: s for s in JobState}
_REASONS = {r.value: r for r in FailureReason}


def meta(rec: Rec, pack_one: Callable[[Any], bytes] | None = None) -> bytes:
    """Pack every mutable field of ``rec`` (with ``pack_one``, a :func:`bunq.codec.packer`
    of the caller's loop over rows, when given)."""
    hist = None if rec.history is None else [
        (a.attempt, a.error, a.duration_ms, a.at, None if a.reason is None else a.reason.value)
        for a in rec.history]  # fmt: skip
    fields = (
        rec.name, rec.seq, rec.run_at, rec.created_at, rec.started_at, rec.finished_at,
        rec.attempts, rec.stalls, rec.token, rec.owner, rec.lease_until, rec.expire_at,
        rec.pending, rec.progress, rec.error, None if rec.reason is None else rec.reason.value,
        rec.dlq_at, rec.dlq_retries, hist,
    )  # fmt: skip
    return pack(fields, "meta") if pack_one is None else pack_one(fields)


def rec_from_row(row: tuple[Any, ...]) -> tuple[Rec, bytes | None]:
    """Rebuild a record (and its result blob) from a ``jobs`` row."""
    jid, queue, state, data, opts_blob, meta_blob, result = row
    (name, seq, run_at, created_at, started_at, finished_at, attempts, stalls, token, owner,
     lease_until, expire_at, pending, progress, error, reason, dlq_at, dlq_retries,
     hist) = unpack(meta_blob)  # fmt: skip
    opts = options_from_blob(bytes(opts_blob))
    rec = Rec(jid, queue, name, bytes(data), opts, _STATES[state], seq, created_at, run_at)
    rec.started_at, rec.finished_at = started_at, finished_at
    rec.attempts, rec.stalls, rec.token, rec.owner = attempts, stalls, token, owner
    rec.lease_until, rec.expire_at = lease_until, expire_at
    rec.pending, rec.progress = pending, progress
    rec.error, rec.reason = error, None if reason is None else _REASONS[reason]
    rec.dlq_at, rec.dlq_retries = dlq_at, dlq_retries
    if hist:
        rec.history = [Attempt(a, e, d, at, None if r is None else _REASONS[r])
                       for a, e, d, at, r in hist]  # fmt: skip
    rec.saved = True
    return rec, None if result is None else bytes(result)


def limits_blob(limits: QueueLimits | None) -> bytes | None:
    """Encode queue limits (None when unlimited)."""
    if limits is None:
        return None
    return setting_blob(limits)


def limits_from(blob: bytes | None) -> QueueLimits | None:
    """Decode queue limits."""
    return None if blob is None else setting_from_blob(QueueLimits, blob)


def dlq_blob(cfg: DlqConfig) -> bytes:
    """Encode DLQ settings."""
    return setting_blob(cfg)


def dlq_from(blob: bytes | None) -> DlqConfig:
    """Decode DLQ settings."""
    return DlqConfig() if blob is None else setting_from_blob(DlqConfig, blob)
