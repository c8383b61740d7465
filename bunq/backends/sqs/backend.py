"""SQSBackend: bunq's job semantics over Amazon SQS queues.

A lease is a ReceiveMessage (10 per call, several calls for more), the fence
is the receipt handle (``Lease.token``) plus the attempt, extend is
ChangeMessageVisibility, complete is DeleteMessageBatch, a retry is
ChangeMessageVisibility to the backoff, the attempt is
``ApproximateReceiveCount + bunq-base``, and the DLQ is the queue's
RedrivePolicy target. SQS's own timers (visibility, DelaySeconds) run on the
server: an expired lease comes back by itself, so :meth:`sweep` has nothing
to do. docs/sqs.md lists what SQS cannot do (:data:`CAPABILITIES`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from ...errors import BunqError, ValidationError
from ...job import (
    DlqEntry,
    Job,
    JobId,
    JobState,
    Lease,
    NewJob,
    Settle,
    UniqueStrategy,
    check_new_jobs,
    now_ms,
    refuse_group_max_size,
)
from ...policy import FailDecision
from ..base import Capability, Clock, DlqConfig, SweepResult, check_queue_name
from .client import Api, QueueInfo
from .codec import Envelope, check_size, encode_body
from .config import SqsConfig, parse_url
from .dlq import Scans
from .fences import Fences, Held
from .moves import MAX_VISIBILITY_S, Copy, Mover, copy_attrs, dead_attrs, delay_split
from .receive import Receiver, visibility
from .refuse import Refusals, refusal

log = logging.getLogger("bunq.sqs")
CAPABILITIES = frozenset({Capability.DELAY, Capability.DLQ, Capability.TTL,
                          Capability.MULTI_PROCESS})  # fmt: skip


class SQSBackend(Refusals):
    """Backend over SQS queues (one backend serves every queue under its prefix).

    :param cfg: where the queues are (:func:`~.config.parse_url` builds it from a URL).
    :param clock: epoch-ms clock for leases' ``expires_at``, delays and TTLs.
    :param client: a boto3 SQS client to use instead of building one.

    Made of parts it holds and delegates to: :class:`~.fences.Fences` (local
    fences), :class:`~.receive.Receiver` (leases, long polls), :class:`~.dlq.Scans`
    (DLQ, drain, obliterate); what SQS cannot do is refused (:class:`~.refuse.Refusals`).
    """

    kind = "sqs"
    # No stall budget of its own: a lapsed lease spends an attempt (the receive count), and
    # SQS redrives a message after maxReceiveCount (at most 1000) receives.
    max_stalls = 1000

    def __init__(self, cfg: SqsConfig | None = None, *, clock: Clock = now_ms,
                 client: Any | None = None) -> None:  # fmt: skip
        self.cfg = cfg or SqsConfig()
        self.clock = clock
        self.api = Api(self.cfg, client)
        self.moves = Mover(self.api)
        fifo = bool(self.cfg.home and self.cfg.home.endswith(".fifo"))
        self.capabilities = CAPABILITIES - {Capability.DELAY} | {Capability.GROUPS} if fifo \
            else CAPABILITIES  # fmt: skip
        self.fences = Fences()
        self.receiver = Receiver(self.cfg, clock, self.api, self.moves, self.fences)
        self.scans = Scans(self.api, self.moves)

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> SQSBackend:
        """Open ``sqs://...`` (docs/sqs.md); ``clock=`` and ``client=`` pass through,
        other keywords override URL options (``create=True``, ``prefix=...``)."""
        clock, client = kw.pop("clock", now_ms), kw.pop("client", None)
        return cls(parse_url(url).with_options(**kw), clock=clock, client=client)

    def __repr__(self) -> str:
        return f"SQSBackend(home={self.cfg.home!r}, prefix={self.cfg.prefix!r})"

    # -- admission ---------------------------------------------------------------------
    def add(self, jobs: Sequence[NewJob]) -> list[Job]:
        """Send jobs (SendMessageBatch, 10 per call); everything is validated first.

        Validation is all-or-nothing; more than one batch is not atomic against
        a transport failure midway (BackendError says how many were sent).
        """
        if not jobs:
            return []
        check_new_jobs(jobs)
        refuse_group_max_size(jobs, self.kind)
        infos = {q: self.api.info(check_queue_name(q)) for q in {j.queue for j in jobs}}
        now = self.clock()
        planned = [self._plan(job, infos[job.queue], now) for job in jobs]
        sent = 0
        for queue, info in infos.items():
            copies = [c for j, c in planned if j.queue == queue]
            try:
                self.moves.send(info.url, info.fifo, copies, info.name)
            except BunqError as exc:
                exc.data["sent_before"] = sent
                raise
            sent += len(copies)
        return [job for job, _ in planned]

    def _plan(self, job: NewJob, info: QueueInfo, now: int) -> tuple[Job, Copy]:
        o = job.opts
        delay_s, due = delay_split(o.delay, now)
        env = Envelope(job.id, job.queue, job.name, job.data, o, now,
                       None if o.ttl is None else now + o.ttl)  # fmt: skip
        body = encode_body(env)  # a bad payload is refused first, as on every backend
        self._refuse_options(job, info)
        dedup = (o.unique_key or job.id) if info.fifo else None
        copy = Copy(body, copy_attrs(0, due), delay_s, o.group, dedup)
        check_size(body, copy.attrs, info.max_size)
        state = JobState.DELAYED if o.delay else JobState.WAITING
        return env.job(state, 0, now + o.delay, None), copy

    def _refuse_options(self, job: NewJob, info: QueueInfo) -> None:
        o = job.opts
        if o.priority:
            raise refusal("priority", "SQS has no priority (use one queue per priority)")
        if o.lifo:
            raise refusal("lifo", "SQS delivers in its own order")
        if o.depends_on or o.parent_id:
            raise refusal("flows", "SQS cannot hold a job until others complete")
        if info.fifo:
            if o.delay:
                raise refusal("delay", "FIFO queues take a delay only per queue (DelaySeconds)")
            if o.unique_key and (o.unique_strategy is not UniqueStrategy.REJECT
                                 or o.unique_ttl is not None):  # fmt: skip
                raise refusal("unique_key", "FIFO queues deduplicate a key for a fixed 5 "
                              "minutes: strategy reject, no unique_ttl")  # fmt: skip
            return
        if o.group:
            raise refusal("groups", f"groups need a FIFO queue ({info.name}.fifo)")
        if o.job_id or o.unique_key:
            raise refusal("job_id" if o.job_id else "unique_key",
                          "deduplication by id or key needs a FIFO queue (5 minutes)")  # fmt: skip

    def _body(self, lease: Lease) -> str:
        """The body of a copy of the leased job (re-encoded: bodies are not kept)."""
        j = lease.job
        return encode_body(
            Envelope(
                j.id,
                j.queue,
                j.name,
                j.data,
                j.opts,
                j.created_at,
                None if j.opts.ttl is None else j.created_at + j.opts.ttl,
            )
        )

    # -- settling ----------------------------------------------------------------------
    def complete(self, lease: Lease, result: Any = None) -> Settle:
        """Delete the message (results are not kept: SQS has nowhere to put them)."""
        return self.complete_many([(lease, result)])[0]

    def complete_many(self, items: Sequence[tuple[Lease, Any]]) -> list[Settle]:
        """Delete messages with DeleteMessageBatch, 10 per call; STALE where SQS refuses."""
        answers = [Settle.STALE] * len(items)
        by_queue: dict[str, dict[str, int]] = {}
        for i, (lease, _) in enumerate(items):
            seen = by_queue.setdefault(lease.job.queue, {})
            if self.fences.check(lease)[0] and lease.token not in seen:
                seen[lease.token] = i
        for queue, idx in by_queue.items():
            if not idx:
                continue
            refused = self.moves.delete(self.api.info(queue), list(idx))
            for handle, i in idx.items():
                answers[i] = Settle.STALE if handle in refused else Settle.OK
                self.fences.settled(handle)
        return answers

    def fail(self, lease: Lease, error: str | None, decision: FailDecision,
             duration_ms: int = 0) -> Settle:  # fmt: skip
        """Retry after the backoff (visibility), give the attempt back (a copy), or dead-letter."""
        ok, held = self.fences.check(lease)
        if not ok:
            return Settle.STALE
        info, now, handle = self.api.info(lease.job.queue), self.clock(), lease.token
        if decision.kind == "dlq":
            if lease.job.opts.remove_on_fail:
                answer = Settle.STALE if self.moves.delete(info, [handle]) else Settle.OK
            else:
                attrs = dead_attrs(decision.reason, error, lease.attempt, duration_ms, now)
                copy = Copy(self._body(lease), attrs, 0, lease.job.opts.group)
                answer = self.moves.dead_letter(info, handle, copy, probe=True)
        elif decision.kind == "retry" or info.fifo:
            answer = self._retry(info, lease, held, max(decision.run_at - now, 0), now)
        else:  # "delay": the attempt is given back
            answer = self._requeue(info, lease, held, lease.attempt - 1, decision.run_at - now)
        self.fences.settled(handle)
        return answer

    def _retry(self, info: QueueInfo, lease: Lease, held: Held | None, wait_ms: int,
               now: int) -> Settle:  # fmt: skip
        secs = math.ceil(wait_ms / 1000)
        left = MAX_VISIBILITY_S - (now - held.received_at) // 1000 - 1 if held else None
        if info.fifo or left is None or secs <= left:
            hide = min(secs, MAX_VISIBILITY_S if left is None else max(left, 0))
            try:
                return Settle.OK if self.moves.hide(info, lease.token, hide) else Settle.STALE
            except ValidationError:  # past the 12 h cap counted from the receive
                if info.fifo:  # a FIFO message keeps its place: retry now rather than later
                    log.warning("%s: backoff of %s cut to 0 (12 h cap)", info.name, lease.id)
                    return Settle.OK if self.moves.hide(info, lease.token, 0) else Settle.STALE
        return self._requeue(info, lease, held, lease.attempt, wait_ms)

    def _requeue(self, info: QueueInfo, lease: Lease, held: Held | None, base: int,
                 delay_ms: int) -> Settle:  # fmt: skip
        delay_s, due = delay_split(max(delay_ms, 0), self.clock())
        copy = Copy(self._body(lease), copy_attrs(base, due), delay_s, lease.job.opts.group)
        return self.moves.replace(info, lease.token, copy, probe=True)

    def extend(self, lease: Lease, lease_ms: int) -> Settle:
        """ChangeMessageVisibility to ``lease_ms`` from now (whole seconds, 12 h cap)."""
        ok, held = self.fences.check(lease)
        if not ok:
            return Settle.STALE
        info, secs = self.api.info(lease.job.queue), visibility(lease_ms)
        if held is not None:
            left = MAX_VISIBILITY_S - (self.clock() - held.received_at) // 1000 - 1
            if secs > left:
                log.warning("%s: job %s cannot be leased past SQS's 12 h visibility cap",
                            info.name, lease.id)  # fmt: skip
                return Settle.STALE
        try:
            return Settle.OK if self.moves.hide(info, lease.token, secs) else Settle.STALE
        except ValidationError:
            return Settle.STALE

    def sweep(self) -> SweepResult:
        """Nothing to do: SQS makes a message visible again when its lease lapses."""
        return SweepResult()

    # -- queries -----------------------------------------------------------------------
    def counts(self, queue: str) -> dict[JobState, int]:
        """SQS's approximate counts: waiting, delayed, active (in flight), failed (DLQ)."""
        info = self.api.info(check_queue_name(queue))
        a = self.scans.approx(info.url, info.name)
        out = dict.fromkeys(JobState, 0)
        out[JobState.WAITING] = int(a.get("ApproximateNumberOfMessages", 0))
        out[JobState.ACTIVE] = int(a.get("ApproximateNumberOfMessagesNotVisible", 0))
        out[JobState.DELAYED] = int(a.get("ApproximateNumberOfMessagesDelayed", 0))
        if info.dlq_url is not None:
            out[JobState.FAILED] = self.scans.dlq_count(info)
        return out

    def queues(self) -> list[str]:
        return self.api.bunq_queues()

    def close(self) -> None:
        """Give back messages received by :meth:`wait` and not leased; close the client."""
        self.receiver.close()
        close = getattr(self.api.client, "close", None)
        if callable(close):
            close()

    # -- delegated to the parts --------------------------------------------------------
    def lease(self, queue: str, n: int, lease_ms: int, owner: str = "") -> list[Lease]:
        """Receive up to ``n`` jobs (:meth:`.Receiver.lease`)."""
        return self.receiver.lease(queue, n, lease_ms, owner)

    def wait(self, queue: str, timeout_ms: int) -> bool:
        """Long-poll and keep what arrives for the next lease (:meth:`.Receiver.wait`)."""
        return self.receiver.wait(queue, timeout_ms)

    def dlq_list(self, queue: str, limit: int = 100, offset: int = 0) -> list[DlqEntry]:
        return self.scans.dlq_list(queue, limit, offset)

    def dlq_retry(self, queue: str, job_id: JobId | None = None) -> int:
        return self.scans.dlq_retry(queue, job_id)

    def dlq_purge(self, queue: str) -> int:
        return self.scans.dlq_purge(queue)

    def dlq_size(self, queue: str) -> int:
        return self.scans.dlq_size(queue)

    def dlq_remove(self, queue: str, job_id: JobId) -> bool:
        return self.scans.dlq_remove(queue, job_id)

    def dlq_config(self, queue: str, config: DlqConfig | None = None) -> DlqConfig:
        return self.scans.dlq_config(queue, config)

    def drain(self, queue: str) -> int:
        return self.scans.drain(queue)

    def obliterate(self, queue: str, force: bool = False) -> None:
        self.scans.obliterate(queue, force)
        self.receiver.forget(queue)


__all__ = ["CAPABILITIES", "SQSBackend", "visibility"]
