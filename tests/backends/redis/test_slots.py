"""Cluster-ready keys: every script call touches keys of one slot only.

A private redis-server runs MONITOR while a workload calls every function of the
library; each FCALL is followed in the MONITOR stream by the commands its function ran
(a function runs atomically, so nothing interleaves). ``COMMAND GETKEYS`` names each command's
keys, and redis-py's ``key_slot`` (CRC16, hash tags) must give them all the slot of
the call's KEYS[1].
"""

from __future__ import annotations

import re
import socket
import threading
from typing import Any

import pytest
from contract.helpers import add, fail

from bunq import connect
from bunq.backends.base import DlqConfig, QueueLimits
from bunq.backends.redis.scripts import SCRIPTS
from bunq.job import JobState
from bunq.queue import new_job

pytestmark = pytest.mark.redis

ARG = re.compile(rb'"((?:[^"\\]|\\.)*)"')
ESC = re.compile(rb"\\(x[0-9a-fA-F]{2}|.)")
SIMPLE = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b"}


def unquote(raw: bytes) -> bytes:
    def one(m: re.Match[bytes]) -> bytes:
        e = m.group(1)
        if e[:1] == b"x" and len(e) == 3:
            return bytes([int(e[1:], 16)])
        return SIMPLE.get(e, e)

    return ESC.sub(one, raw)


class Monitor:
    """Collect MONITOR lines of one server in a thread: (from_lua, args)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        self.lines: list[tuple[bool, list[bytes]]] = []
        self._buf = b""
        assert self._line() == b"+OK"
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _line(self) -> bytes | None:
        while b"\r\n" not in self._buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\r\n", 1)
        return line

    def _run(self) -> None:
        while (line := self._line()) is not None:
            head, _, rest = line.partition(b"] ")
            self.lines.append((b" lua" in head, [unquote(a) for a in ARG.findall(rest)]))

    def stop(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(5)


def workload(be: Any, clock: Any) -> None:
    be.set_limits("q", QueueLimits(rate_max=100, group_concurrency=2, group_rate_max=50))
    be.dlq_config("q", DlqConfig(auto_retry=True, auto_retry_interval=10, max_entries=1))
    a = add(be, data=1, group="g", unique_key="u", ttl=60_000)
    add(be, data=2, depends_on=[a.id], parent_id=a.id)
    add(be, data=3, delay=5, lifo=True, priority=3, job_id="custom")
    add(be, data=4, attempts=1, remove_on_fail=True)
    add(be, "other", data=5)
    be.add([new_job("other", "bulk", i, {}) for i in range(3)])  # index_put per id shard
    add(be, "other", data=6, depends_on=[a.id])  # across queues: link, outbox, xrelease
    be.update_progress(a.id, 50)
    be.add_log(a.id, "line")
    be.get_job(a.id)
    be.get_jobs("q", JobState.WAITING)
    be.get_jobs_page("q", JobState.WAITING, 1)
    be.counts("q")
    leases = be.lease("q", 10, 1_000)
    assert a.id in {lease.id for lease in leases}
    be.extend(leases[0], 2_000)
    be.complete_many([(lease, 1) for lease in leases if lease.id == a.id])
    for lease in leases:
        if lease.id != a.id:
            fail(be, lease, unrecoverable=True)
    clock.advance(50)
    be.sweep()
    be.dlq_list("q")
    be.dlq_retry("q")
    be.lease("q", 10, 1)
    clock.advance(10)
    be.sweep()
    be.clean("q", 0, 10, JobState.COMPLETED)
    be.dlq_purge("q")
    be.drain("other")
    be.kv_put("ns", "k", b"v", create=True)
    jobops(be)
    be.obliterate("q", force=True)


def jobops(be: Any) -> None:
    """Every per-job operation (jobop.lua), each in its job's queue slot."""
    w, d = add(be, "ops", data=1, unique_key="k"), add(be, "ops", data=2, delay=60_000)
    be.change_priority(w.id, 4)
    be.update_data(w.id, 3)
    be.change_delay(w.id, 10)
    be.promote_job(w.id)
    be.promote_jobs("ops", 5)
    be.counts_per_priority("ops")
    be.dedup_job_id("ops", "k")
    be.remove_dedup_key("ops", "k")
    be.add_log(w.id, "x")
    be.clear_logs(w.id, 0)
    be.discard_job(w.id)
    be.retry_job(w.id)
    be.remove_job(d.id)


def test_every_script_call_touches_one_slot(own_redis: Any, clock: Any) -> None:
    import redis
    from redis.crc import key_slot

    be = connect(own_redis.url + "?prefix=slots", clock=clock)
    admin = redis.Redis.from_url(own_redis.url)
    mon = Monitor(own_redis.port)
    try:
        workload(be, clock)
        admin.ping()  # a marker after the workload
    finally:
        import time

        time.sleep(0.5)
        mon.stop()
        be.close()
    names = {s.fn: s.name for s in SCRIPTS.by_name.values()}
    seen: set[str] = set()
    calls = checked = 0
    slot = None
    for from_lua, args in mon.lines:
        if not args:
            continue
        if not from_lua:
            slot = None
            if args[0].upper() == b"FCALL":
                seen.add(names[args[1]])
                assert int(args[2]) == 1, "each function is called with one key: its tag"
                slot = key_slot(args[3])
                calls += 1
            continue
        assert slot is not None, f"a script command outside a script call: {args}"
        try:
            keys = admin.command_getkeys(*args)
        except redis.ResponseError:
            continue  # no key arguments (TIME, ...)
        for key in keys:
            key = key if isinstance(key, bytes) else key.encode()
            assert key_slot(key) == slot, f"{args[0]!r} touches {key!r} outside the call's slot"
            checked += 1
    admin.close()
    assert calls > 20 and checked > 5 * calls
    assert seen == set(names.values()), f"scripts not exercised: {set(names.values()) - seen}"
