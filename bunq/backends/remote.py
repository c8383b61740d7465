"""RemoteBackend: the Backend contract against a running ``bunq serve``.

``bunq://host:6789?token=secret&timeout=30`` opens one pipelined connection
(:class:`bunq.client_link.Link`) shared by every thread. Queue, Worker and
tick() work over it exactly as in-process:

- concurrent ``add`` calls from several threads are coalesced into one
  ``BqAdd`` frame (each call stays atomic on its own); the server's group
  commit then admits them in one backend transaction;
- ``complete_many`` is one ``BqComplete`` (bunq's ACKB with full fences);
- ``extend`` is ``BqExtend`` (the Worker's heartbeat), ``wait`` a server-side
  long poll (``BqWait``);
- error replies come back as the same typed errors (``BunqError.from_wire``);
- the link reconnects after a dropped or half-open connection (timeouts and
  pings); calls that cannot have taken effect are retried, others raise
  BackendUnavailable, which the drivers already retry.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from ..batching import Batcher, Slot
from ..client_link import Link
from ..errors import BunqError, ConfigError, ValidationError
from ..job import DlqEntry, Job, JobId, JobState, Lease, NewJob, Settle, check_new_jobs, now_ms
from ..jobevents import EventKind, JobEvent
from ..policy import DEFAULT_MAX_STALLS, FailDecision
from ..protocol import error_from_reply
from ..validate import page
from ..wire_shapes import dlq_from_bq, job_from_bq, options_to_wire
from . import remote_jobops
from .base import Capability, Clock, DlqConfig, QueueLimits, SweepResult
from .remote_events import RemoteEventReader
from .urls import redact

MAX_ADD_FRAME = 5_000  # jobs per coalesced BqAdd


Rows = list[list[Any]]  # one add call's jobs, as BqAdd rows


def _send_adds(link: Link, batch: list[Slot[Rows]]) -> None:
    """One BqAdd frame for the add calls of ``batch`` (each stays atomic on its own)."""
    reply = link.call({"cmd": "BqAdd", "groups": [s.work for s in batch]})
    for slot, res in zip(batch, reply["results"], strict=True):  # one result per call
        if res.get("ok") is True:
            slot.result = res["jobs"]
        else:
            slot.error = error_from_reply(res)


def _fence(lease: Lease) -> list[Any]:
    return [lease.job.id, lease.token, lease.attempt]


class RemoteBackend:
    """A client of ``bunq serve`` that is itself a Backend.

    :param host: server host.
    :param port: server TCP port (6789).
    :param token: Auth token when the server requires one.
    :param clock: epoch-ms clock; by default the local clock corrected by the
        offset to the server's backend clock measured at connect.
    :param timeout: seconds to wait for a reply before resetting the connection.
    """

    kind = "remote"

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 6789,
        token: str | None = None,
        *,
        clock: Clock | None = None,
        timeout: float = 30.0,
        ping_interval: float = 10.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.link = Link(host, port, token, timeout=timeout, ping_interval=ping_interval, tls=tls)
        self._clock = clock
        # Concurrent adds share one frame; a batch one caller's data refused is resent
        # call by call, so that refusal stays that caller's.
        self._adds: Batcher[Rows] = Batcher(
            lambda batch: _send_adds(self.link, batch), alone_on=(ValidationError,),
            most=MAX_ADD_FRAME, size=len)  # fmt: skip
        self._offset: int | None = None

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> RemoteBackend:
        """``bunq://host:port?token=...&timeout=30``; ``bunqs://`` (or ``?tls=1``): TLS,
        verified against the system's CAs or ``ca=/path.pem``; ``cert=``/``key=``: a
        client certificate."""
        u = urlparse(url)
        if u.scheme not in ("bunq", "bunqs") or not u.hostname:
            raise ConfigError(f"expected bunq://host:port, got {redact(url)!r}")
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        if u.scheme == "bunqs" or q.get("tls", "0") not in ("0", "false", ""):
            from ..tls import client_context

            kw.setdefault("tls", client_context(q.get("ca"), q.get("cert"), q.get("key")))
        elif {"ca", "cert", "key"} & set(q):
            raise ConfigError("bunq:// ca, cert and key need TLS: use bunqs:// (or tls=1)")
        unknown = set(q) - {"token", "timeout", "tls", "ca", "cert", "key"}
        if unknown:
            raise ConfigError(f"unknown bunq:// URL options {sorted(unknown)}")
        token = q.get("token") or (unquote(u.password) if u.password else None)
        if "timeout" in q:
            try:
                kw.setdefault("timeout", float(q["timeout"]))
            except ValueError:
                raise ConfigError(f"bunq:// timeout must be a number: {redact(url)!r}") from None
        return cls(u.hostname, u.port or 6789, token, **kw)

    # -- server facts ------------------------------------------------------------------
    def _info(self) -> dict[str, Any]:
        if not self.link.hello:
            self.link.call({"cmd": "Ping"}, idempotent=True)
        info: dict[str, Any] = self.link.hello.get("bunq") or {}
        return info

    @property
    def capabilities(self) -> frozenset[Capability]:
        known = {c.value for c in Capability}
        return frozenset(Capability(c) for c in self._info().get("capabilities", ()) if c in known)

    @property
    def max_stalls(self) -> int:
        return int(self._info().get("maxStalls", DEFAULT_MAX_STALLS))

    def clock(self) -> int:
        if self._clock is not None:
            return self._clock()
        if self._offset is None:
            hello = {"cmd": "Hello", "protocolVersion": 3, "capabilities": ["bunq"]}
            t0 = now_ms()
            try:  # a fresh reading of the server's backend clock, halfway through a round trip
                server = int(self.link.call(hello, idempotent=True)["bunq"]["time"])
            except (BunqError, KeyError, TypeError, ValueError):
                return now_ms()  # unreachable (or not bunq) for now: measured again later
            self._offset = server - (t0 + now_ms()) // 2
        return now_ms() + self._offset

    def _call(
        self, cmd: str, idempotent: bool = False, reply_timeout: float | None = None, **fields: Any
    ) -> dict[str, Any]:
        return self.link.call({"cmd": cmd, **fields}, reply_timeout, idempotent)

    def _read(self, cmd: str, **fields: Any) -> dict[str, Any]:
        return self._call(cmd, True, **fields)

    # -- admission ---------------------------------------------------------------------
    def add(self, jobs: Sequence[NewJob]) -> list[Job]:
        if not jobs:
            return []
        check_new_jobs(jobs)
        rows = [[j.id, j.queue, j.name, j.data, options_to_wire(j.opts)] for j in jobs]
        return [job_from_bq(r) for r in self._adds.run(rows)]

    # -- leases ------------------------------------------------------------------------
    def lease(self, queue: str, n: int, lease_ms: int, owner: str = "") -> list[Lease]:
        if n <= 0:
            return []
        reply = self._call(
            "BqLease", queue=queue, count=min(n, 1000), lockTtl=lease_ms, owner=owner or "remote"
        )
        return [
            Lease(job_from_bq(j), token, attempt, expires, owner)
            for j, token, attempt, expires in reply["leases"]
        ]

    # -- job events (the server publishes what it performs: bunq.backends.remote_events) ---
    own_events = frozenset(EventKind)  # drivers publish nothing over bunq://

    def publish_events(self, events: Sequence[JobEvent]) -> None:
        """Nothing to send: the server publishes every change it makes itself."""

    def event_reader(self, queue: str) -> RemoteEventReader:
        return RemoteEventReader(self.link, queue)

    def wait(self, queue: str, timeout_ms: int) -> bool:
        t = max(0, min(int(timeout_ms), 60_000))
        self._call("BqWait", True, t / 1000 + self.link.timeout, queue=queue, timeout=t)
        return True

    def complete(self, lease: Lease, result: Any = None) -> Settle:
        return self.complete_many([(lease, result)])[0]

    def complete_many(self, items: Sequence[tuple[Lease, Any]]) -> list[Settle]:
        if not items:
            return []
        reply = self._call("BqComplete", items=[[*_fence(le), r] for le, r in items])
        return [Settle.OK if ok else Settle.STALE for ok in reply["settled"]]

    def fail(
        self, lease: Lease, error: str | None, decision: FailDecision, duration_ms: int = 0
    ) -> Settle:
        reply = self._call(
            "BqFail",
            fence=_fence(lease),
            error=error,
            duration=duration_ms,
            decision=[decision.kind, decision.run_at, decision.reason.value],
        )
        return Settle.OK if reply["settled"] else Settle.STALE

    def extend(self, lease: Lease, lease_ms: int) -> Settle:
        reply = self._call("BqExtend", True, fence=_fence(lease), leaseMs=lease_ms)
        return Settle.OK if reply["settled"] else Settle.STALE

    def sweep(self) -> SweepResult:
        return SweepResult(**self._call("BqSweep", True)["result"])

    # -- queries -----------------------------------------------------------------------
    def get_job(self, job_id: JobId) -> Job | None:
        row = self._read("BqGetJob", id=job_id)["job"]
        return None if row is None else job_from_bq(row)

    def get_jobs(self, queue: str, state: JobState, offset: int = 0, limit: int = 100) -> list[Job]:
        offset, limit = page(offset, limit)  # null would mean "the default" on the wire
        reply = self._read(
            "BqGetJobs", queue=queue, state=JobState.parse(state).value, offset=offset, limit=limit
        )
        return [job_from_bq(r) for r in reply["jobs"]]

    def counts(self, queue: str) -> dict[JobState, int]:
        counts = self._read("BqCounts", queue=queue)["counts"]
        return {JobState(k): int(v) for k, v in counts.items()}

    def queues(self) -> list[str]:
        return list(self._read("ListQueues")["queues"])

    def get_children_results(self, parent_id: JobId) -> dict[JobId, Any]:
        return dict(self._read("BqChildren", id=parent_id)["results"])

    def set_parent(self, job_id: JobId, parent_id: JobId) -> None:
        self._call("UpdateParent", True, childId=job_id, parentId=parent_id)

    def remove_child_dependency(self, child_id: JobId) -> tuple[bool, str | None]:
        reply = self._call("RemoveChildDependency", id=child_id)
        return bool(reply["removed"]), reply.get("queue")

    # -- queue control -----------------------------------------------------------------
    def pause(self, queue: str) -> None:
        self._call("Pause", True, queue=queue)

    def resume(self, queue: str) -> None:
        self._call("Resume", True, queue=queue)

    def is_paused(self, queue: str) -> bool:
        return bool(self._read("IsPaused", queue=queue)["paused"])

    def drain(self, queue: str) -> int:
        return int(self._call("Drain", queue=queue)["count"])

    def clean(self, queue: str, grace_ms: int, limit: int, state: JobState) -> list[JobId]:
        reply = self._call(
            "Clean", queue=queue, grace=grace_ms, limit=limit, state=JobState.parse(state).value
        )
        return list(reply["ids"])

    def obliterate(self, queue: str, force: bool = False) -> None:
        self._call("Obliterate", queue=queue, force=force)

    def set_limits(self, queue: str, limits: QueueLimits) -> None:
        self._call("BqLimits", True, queue=queue, limits=asdict(limits))

    def get_limits(self, queue: str) -> QueueLimits:
        return QueueLimits(**self._read("BqLimits", queue=queue)["limits"])

    # -- per-job data ------------------------------------------------------------------
    def update_progress(self, job_id: JobId, progress: int) -> None:
        self._call("Progress", True, id=job_id, progress=progress)

    def add_log(self, job_id: JobId, line: str) -> None:
        self._call("AddLog", id=job_id, message=line)

    def get_logs(self, job_id: JobId) -> list[str]:
        logs = self._read("GetLogs", id=job_id)["data"]["logs"]
        return [entry["message"] for entry in logs]

    # -- per-job operations (remote_jobops: bunqueue's commands) ------------------------
    remove_job = remote_jobops.remove_job
    retry_job = remote_jobops.retry_job
    promote_job = remote_jobops.promote_job
    promote_jobs = remote_jobops.promote_jobs
    change_priority = remote_jobops.change_priority
    change_delay = remote_jobops.change_delay
    update_data = remote_jobops.update_data
    discard_job = remote_jobops.discard_job
    clear_logs = remote_jobops.clear_logs
    counts_per_priority = remote_jobops.counts_per_priority
    dedup_job_id = remote_jobops.dedup_job_id
    remove_dedup_key = remote_jobops.remove_dedup_key

    # -- dead-letter queue -------------------------------------------------------------
    def dlq_list(self, queue: str, limit: int = 100, offset: int = 0) -> list[DlqEntry]:
        offset, limit = page(offset, limit)
        reply = self._read("BqDlq", queue=queue, limit=limit, offset=offset)
        return [dlq_from_bq(e) for e in reply["entries"]]

    def dlq_retry(self, queue: str, job_id: JobId | None = None) -> int:
        return int(self._call("RetryDlq", queue=queue, jobId=job_id)["count"])

    def dlq_purge(self, queue: str) -> int:
        return int(self._call("PurgeDlq", queue=queue)["count"])

    def dlq_size(self, queue: str) -> int:
        return int(self._read("BqDlqSize", queue=queue)["size"])

    def dlq_remove(self, queue: str, job_id: JobId) -> bool:
        return bool(self._call("RemoveDlqJob", queue=queue, jobId=job_id)["data"]["removed"])

    def dlq_config(self, queue: str, config: DlqConfig | None = None) -> DlqConfig:
        cfg = None if config is None else asdict(config)
        return DlqConfig(**self._call("BqDlqConfig", True, queue=queue, config=cfg)["config"])

    # -- small shared records ----------------------------------------------------------
    def kv_get(self, ns: str, key: str) -> bytes | None:
        value = self._read("BqKv", op="get", ns=ns, key=key)["value"]
        return None if value is None else bytes(value)

    def kv_put(
        self, ns: str, key: str, value: bytes, expected: bytes | None = None, create: bool = False
    ) -> bool:
        return bool(
            self._call(
                "BqKv",
                op="put",
                ns=ns,
                key=key,
                value=bytes(value),
                expected=expected,
                create=create,
            )["value"]
        )

    def kv_delete(self, ns: str, key: str) -> bool:
        return bool(self._call("BqKv", op="delete", ns=ns, key=key)["value"])

    def kv_list(self, ns: str) -> dict[str, bytes]:
        return {k: bytes(v) for k, v in self._read("BqKv", op="list", ns=ns)["value"].items()}

    def close(self) -> None:
        self.link.close()
