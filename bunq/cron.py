"""Cron schedules: jobs added on a cron expression or a fixed interval.

A :class:`Schedule` is a spec (which job, when) plus its state (next run, runs,
last job), kept as JSON in the backend's shared records (``kv_*``, namespace
``"cron"``): every process sharing the backend may fire it (the server on a
timer, :func:`bunq.tick.tick` for its queue).

Exactly once per run: firing advances ``next_run`` by compare-and-set
(``kv_put(expected=old)``) and only the winner adds the job, with the id
``cron:<name>:<run_at>``. A firer that dies between the two leaves a
``pending`` mark that a later ``fire_due`` resolves after
:data:`RECOVER_AFTER_MS` (adding the job only if it does not exist).

*When* is decided by pure functions of a schedule and ``now`` (epoch ms):
:func:`next_run_after`, :func:`latest_run_at`, :func:`plan`. croniter is
imported only when a cron expression is used.
"""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .backends.base import Backend, Capability, check_queue_name
from .errors import ConfigError, DuplicateJob, UnsupportedError, ValidationError
from .job import Job, JobOptions, JobState, NewJob
from .validate import MAX_COUNT, MAX_DURATION_MS, MAX_TIME, integer, text

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

NS = "cron"
RECOVER_AFTER_MS = 30_000
LIVE = frozenset({JobState.WAITING, JobState.DELAYED, JobState.ACTIVE,
                  JobState.WAITING_CHILDREN, JobState.PAUSED})  # fmt: skip
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")  # fullmatch: no trailing newline
_FRESH: dict[str, Any] = {"next_run": None, "runs": 0, "skipped": 0, "last_run_at": None,
                          "last_job_id": None, "pending": None, "pending_at": None}  # fmt: skip
_STATE_FIELDS = tuple(_FRESH)
_TIMING_FIELDS = ("cron", "every_ms", "tz", "start_at", "end_at")


@dataclass(frozen=True)
class Schedule:
    """A recurring job: ``cron`` (5 fields, or 6 with seconds first) or ``every_ms``.

    :param name: unique schedule name (letters, digits, ``_ . -``).
    :param queue: queue the jobs go to.
    :param job_name: name of each job.
    :param data: JSON-serialisable job data.
    :param opts: job options (as for ``Queue.add``; ``job_id`` is set per run).
    :param cron: ``"*/5 * * * *"``, ``"0 */10 * * * *"`` (seconds first) or ``@hourly``.
    :param every_ms: a fixed interval instead of ``cron``; runs at ``start_at + k*every_ms``
        (epoch-aligned when ``start_at`` is None).
    :param tz: IANA time zone the cron expression is read in.
    :param start_at: no run before this; ``end_at``: none after it (epoch ms).
    :param limit: at most this many runs, then the schedule stops.
    :param catch_up: after downtime, fire one run for the missed ones (the latest);
        the default skips a run that is more than ``misfire_grace_ms`` late.
    :param misfire_grace_ms: how late a run may fire when ``catch_up`` is off; keep it
        above the period of whatever calls ``fire_due`` (the tick schedule).
    :param prevent_overlap: skip a run while the previous run's job is still live.
    The remaining fields are state, kept by the :class:`Scheduler`.
    """

    name: str
    queue: str
    job_name: str
    cron: str | None = None
    every_ms: int | None = None
    data: Any = None
    opts: Mapping[str, Any] = field(default_factory=dict)
    tz: str = "UTC"
    start_at: int | None = None
    end_at: int | None = None
    limit: int | None = None
    catch_up: bool = False
    misfire_grace_ms: int = 600_000
    prevent_overlap: bool = True
    next_run: int | None = None  # state from here on
    runs: int = 0
    skipped: int = 0
    last_run_at: int | None = None
    last_job_id: str | None = None
    pending: str | None = None  # job id advanced-but-unconfirmed (crash recovery)
    pending_at: int | None = None

    def spec(self) -> dict[str, Any]:
        """Return the spec fields (everything but state) as plain data."""
        return {k: v for k, v in self.to_dict().items() if k not in _STATE_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["opts"] = dict(self.opts)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schedule:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True, slots=True)
class FirePlan:
    """``fire_at``: the run to fire now (or None); ``next_run``: the next (None: finished)."""

    fire_at: int | None
    next_run: int | None
    skipped: int = 0


@lru_cache(maxsize=256)
def _zone(tz: str) -> ZoneInfo:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"unknown time zone {tz!r} (use an IANA name such as 'Europe/Paris')")\
            from None  # fmt: skip


def _seconds_first(expr: str) -> bool:
    return len(expr.split()) == 6


def check_cron(expr: str) -> str:
    """Return ``expr`` if it is a valid 5-field (or seconds-first 6-field) expression."""
    from croniter import croniter

    n = len(expr.split()) if isinstance(expr, str) else 0
    ok = n in (5, 6) or (n == 1 and expr.startswith("@"))
    if not ok or not croniter.is_valid(expr, second_at_beginning=n == 6):
        raise ConfigError(
            f"invalid cron expression {expr!r}: use 5 fields 'min hour dom mon dow', "
            "6 with seconds first, or @hourly/@daily/..."
        )
    return expr


def _cron_step(expr: str, tz: str, at_ms: int, forward: bool) -> int:
    from croniter import croniter

    start = datetime.fromtimestamp(at_ms / 1000, _zone(tz))
    it = croniter(expr, start, second_at_beginning=_seconds_first(expr))
    nxt = it.get_next(datetime) if forward else it.get_prev(datetime)
    return int(round(nxt.timestamp() * 1000))


def next_run_after(s: Schedule, after: int) -> int | None:
    """Return the first run strictly after ``after`` (epoch ms), or None past ``end_at``.

    Honours ``start_at`` and ``end_at``; ``limit`` is the caller's business.
    """
    lo = after if s.start_at is None else max(after, s.start_at - 1)
    if s.every_ms is not None:
        anchor = s.start_at or 0
        k = (lo - anchor) // s.every_ms + 1 if lo >= anchor else 0
        at = anchor + k * s.every_ms
    else:
        assert s.cron is not None
        at = _cron_step(s.cron, s.tz, lo, forward=True)
    return None if s.end_at is not None and at > s.end_at else at


def latest_run_at(s: Schedule, now: int) -> int | None:
    """Return the latest run at or before ``now`` (and ``end_at``), or None."""
    hi = now if s.end_at is None else min(now, s.end_at)
    if s.every_ms is not None:
        anchor = s.start_at or 0
        at = anchor + (hi - anchor) // s.every_ms * s.every_ms if hi >= anchor else None
    else:
        assert s.cron is not None
        at = _cron_step(s.cron, s.tz, hi + 1, forward=False)
    if at is None or (s.start_at is not None and at < s.start_at):
        return None
    return at


def plan(s: Schedule, now: int, previous_live: bool = False) -> FirePlan:
    """Decide what to fire at ``now`` (pure).

    Of the due runs (``next_run`` .. ``now``) only the latest may fire: when it
    is at most ``misfire_grace_ms`` late, or always with ``catch_up``. Runs
    before it are skipped. ``previous_live`` (the last run's job is still
    live) skips the run when ``prevent_overlap`` is set.
    """
    if s.next_run is None or s.next_run > now:
        return FirePlan(None, s.next_run)
    if s.limit is not None and s.runs >= s.limit:
        return FirePlan(None, None)
    latest = max(s.next_run, latest_run_at(s, now) or s.next_run)
    on_time = now - latest <= s.misfire_grace_ms
    fire = (on_time or s.catch_up) and not (s.prevent_overlap and previous_live)
    nxt = next_run_after(s, now)
    if s.limit is not None and s.runs + int(fire) >= s.limit:
        nxt = None
    return FirePlan(latest if fire else None, nxt, 0 if fire else 1)


def job_id_for(name: str, run_at: int) -> str:
    """The dedup id of one run: ``cron:<name>:<run_at>``."""
    return f"cron:{name}:{run_at}"


def validate(s: Schedule) -> Schedule:
    """Check a schedule's spec; return it with ``opts`` as a plain dict.

    :raises ConfigError: bad name, queue, timing fields or time zone.
    :raises ValidationError: bad job options or non-JSON data.
    """
    if not isinstance(s.name, str) or not _NAME.fullmatch(s.name):
        raise ConfigError(f"invalid schedule name {s.name!r}: 1-128 of letters, digits, _ . -")
    check_queue_name(s.queue)
    text(s.job_name, "job_name")
    _check_timing(s)
    opts = dict(s.opts or {})
    if "job_id" in opts:
        raise ValidationError("cron jobs get job_id cron:<name>:<run_at>; do not set job_id")
    JobOptions.parse(opts)
    try:
        json.dumps(s.data)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"schedule data must be JSON-serialisable: {exc}") from None
    return replace(s, opts=opts)


def _check_timing(s: Schedule) -> None:
    if (s.cron is None) == (s.every_ms is None):
        raise ConfigError(f"schedule {s.name!r}: give exactly one of cron= or every_ms=")
    if s.cron is not None:
        check_cron(s.cron)
    else:
        integer(s.every_ms, "every_ms", 1, MAX_DURATION_MS, ConfigError)
    _zone(s.tz)
    for name, hi in (("start_at", MAX_TIME), ("end_at", MAX_TIME),
                     ("misfire_grace_ms", MAX_DURATION_MS)):  # fmt: skip
        if getattr(s, name) is not None:
            integer(getattr(s, name), name, 0, hi, ConfigError)
    if s.limit is not None:
        integer(s.limit, "limit", 1, MAX_COUNT, ConfigError)
    if not isinstance(s.catch_up, bool) or not isinstance(s.prevent_overlap, bool):
        raise ConfigError("catch_up and prevent_overlap must be true or false")
    if s.start_at is not None and s.end_at is not None and s.end_at < s.start_at:
        raise ConfigError("end_at is before start_at")


def encode(s: Schedule) -> bytes:
    return json.dumps(s.to_dict(), sort_keys=True, separators=(",", ":")).encode()


def decode(raw: bytes) -> Schedule:
    return Schedule.from_dict(json.loads(raw))


class Scheduler:
    """Schedules stored in one backend; any number of processes may share them.

    Methods that need the time take ``now`` (epoch ms; default the backend's clock).
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def _now(self, now: int | None) -> int:
        return self.backend.clock() if now is None else now

    def add(self, schedule: Schedule, now: int | None = None) -> Schedule:
        """Create a schedule; raise ConfigError if the name is taken."""
        s = self._prepare(schedule, now)
        if not self.backend.kv_put(NS, s.name, encode(s), create=True):
            raise ConfigError(f"schedule {s.name!r} exists; use upsert() to change it")
        return s

    def upsert(self, schedule: Schedule, now: int | None = None) -> Schedule:
        """Create or update a schedule, keeping its state when the spec is unchanged.

        Safe to call at every start-up: an unchanged schedule keeps its
        ``next_run`` (no extra run); a changed one keeps ``runs`` and restarts
        its timing from ``now``.
        """
        for _ in range(10):
            raw = self.backend.kv_get(NS, schedule.name)
            if raw is None:
                s = self._prepare(schedule, now)
                if self.backend.kv_put(NS, s.name, encode(s), create=True):
                    return s
                continue
            old = decode(raw)
            new = validate(schedule)
            if new.spec() == old.spec():
                return old
            s = replace(new, **{k: getattr(old, k) for k in _STATE_FIELDS})
            if any(getattr(new, k) != getattr(old, k) for k in _TIMING_FIELDS):
                s = replace(s, next_run=next_run_after(s, self._now(now)))
            if self.backend.kv_put(NS, s.name, encode(s), expected=raw):
                return s
        raise ConfigError(f"schedule {schedule.name!r} is being changed concurrently; retry")

    def _prepare(self, schedule: Schedule, now: int | None) -> Schedule:
        s = validate(schedule)
        if s.prevent_overlap and Capability.GET_JOB not in self.backend.capabilities:
            raise UnsupportedError(self.backend.kind, "cron prevent_overlap (needs get_job)")
        s = replace(s, **_FRESH)
        return replace(s, next_run=next_run_after(s, self._now(now)))

    def remove(self, name: str) -> bool:
        """Delete a schedule; return whether it existed."""
        return self.backend.kv_delete(NS, name)

    def get(self, name: str) -> Schedule | None:
        """Return one schedule with its state, or None."""
        raw = self.backend.kv_get(NS, name)
        return None if raw is None else decode(raw)

    def list(self, queue: str | None = None) -> list[Schedule]:
        """Return schedules (of one queue, or all), by name."""
        out = [decode(raw) for _, raw in sorted(self.backend.kv_list(NS).items())]
        return [s for s in out if queue is None or s.queue == queue]

    def fire_due(self, now: int | None = None, queue: str | None = None) -> builtins.list[Job]:
        """Fire every due schedule (of ``queue``, or all); return the jobs added.

        Safe to run concurrently from many processes: each run is added once.
        """
        at = self._now(now)
        fired: builtins.list[Job] = []
        for name, raw in self.backend.kv_list(NS).items():
            s = decode(raw)
            if queue is not None and s.queue != queue:
                continue
            if s.pending is not None and s.pending_at is not None \
                    and at - s.pending_at >= RECOVER_AFTER_MS:  # fmt: skip
                recovered = self._recover(s, raw)
                if recovered is None:
                    continue
                raw, s = recovered, decode(recovered)
            if s.next_run is not None and s.next_run <= at:
                job = self._fire_one(name, raw, at)
                if job is not None:
                    fired.append(job)
        return fired

    def fire_next(self, name: str, now: int | None = None) -> Job | None:
        """Add the schedule's next run now, as a job delayed until its time (a repeatable
        job's first run: ``Queue.add(repeat=...)`` returns it). The run is claimed by the
        same compare-and-set as :meth:`fire_due`, so no firer adds it again."""
        at = self._now(now)
        raw = self.backend.kv_get(NS, name)
        if raw is None:
            return None
        s = decode(raw)
        if s.next_run is None or s.next_run <= at:
            return self._fire_one(name, raw, at)
        return self._fire_one(name, raw, s.next_run, delay_from=at)

    def _live(self, job_id: str | None) -> bool:
        if job_id is None:
            return False
        job = self.backend.get_job(job_id)
        return job is not None and job.state in LIVE

    def _fire_one(self, name: str, raw: bytes, now: int,
                  delay_from: int | None = None) -> Job | None:  # fmt: skip
        for _ in range(10):
            s = decode(raw)
            p = plan(s, now, previous_live=s.prevent_overlap and self._live(s.last_job_id))
            if p.fire_at is None and p.next_run == s.next_run:
                return None
            new = replace(s, next_run=p.next_run, skipped=s.skipped + p.skipped)
            if p.fire_at is not None:
                jid = job_id_for(s.name, p.fire_at)
                new = replace(new, runs=s.runs + 1, last_run_at=p.fire_at, last_job_id=jid,
                              pending=jid, pending_at=now)  # fmt: skip
            new_raw = encode(new)
            if self.backend.kv_put(NS, name, new_raw, expected=raw):
                break
            latest = self.backend.kv_get(NS, name)  # another firer won: look again
            if latest is None:
                return None
            raw = latest
        else:
            return None
        if p.fire_at is None:
            return None
        job = self._add(new, p.fire_at, delay_from)
        self.backend.kv_put(NS, name, encode(replace(new, pending=None, pending_at=None)),
                            expected=new_raw)  # fmt: skip
        return job

    def _add(self, s: Schedule, run_at: int, delay_from: int | None = None) -> Job | None:
        jid = job_id_for(s.name, run_at)
        early = {} if delay_from is None else {"delay": max(run_at - delay_from, 0)}
        opts = JobOptions.parse({**s.opts, **early, "job_id": jid})
        try:
            return self.backend.add([NewJob(s.queue, s.job_name, s.data, opts, jid)])[0]
        except DuplicateJob:  # the run's unique_key is held by a live job: this run is skipped
            return None

    def _recover(self, s: Schedule, raw: bytes) -> bytes | None:
        """Resolve a pending fire whose firer did not confirm in time."""
        assert s.pending is not None
        if self.backend.get_job(s.pending) is None and s.last_run_at is not None:
            self._add(s, s.last_run_at)
        cleared = encode(replace(s, pending=None, pending_at=None))
        if self.backend.kv_put(NS, s.name, cleared, expected=raw):
            return cleared
        return self.backend.kv_get(NS, s.name)
