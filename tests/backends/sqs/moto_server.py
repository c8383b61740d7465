"""One moto SQS server per test session, shared by every fixture that needs SQS.

``start()`` sets fake AWS credentials (never real ones) in the environment,
starts ``moto.server.ThreadedMotoServer`` on 127.0.0.1 with port 0 (a free
port; ``get_host_and_port()`` says which) and returns its endpoint; later
calls return the same endpoint. ``stop()`` stops it and restores the
environment. :func:`sqs_url` builds a backend URL on it under a unique prefix.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Any

from bunq.job import now_ms

FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}  # fmt: skip
_state: dict[str, Any] = {}
RETENTION = "is_message_valid_based_on_retention_period"


class MotoMissing(RuntimeError):
    """moto[server] cannot be imported."""


def start() -> str:
    """Start (once) and return the endpoint URL, e.g. ``http://127.0.0.1:41234``."""
    if "endpoint" in _state:
        return str(_state["endpoint"])
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        msg = f"moto[server] is not installed ({exc}): pip install 'moto[server]'"
        raise MotoMissing(msg) from exc
    _state["env"] = {k: os.environ.get(k) for k in FAKE_ENV}
    os.environ.update(FAKE_ENV)
    _state["undo"] = speed_up_moto() + serialize_deletes()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    _state.update(server=server, endpoint=f"http://{host}:{port}")
    return str(_state["endpoint"])


def stop() -> None:
    """Stop the server and put the environment back."""
    server = _state.pop("server", None)
    if server is not None:
        server.stop()
    for undo in _state.pop("undo", []):
        undo()
    for key, value in _state.pop("env", {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    _state.pop("endpoint", None)


def sqs_url(prefix: str | None = None, **options: Any) -> str:
    """An sqs:// URL on the server: a fresh prefix, queues created on first use."""
    opts = {"endpoint": start(), "region": "us-east-1",
            "prefix": prefix or f"t{uuid.uuid4().hex[:10]}-", "create": "1",
            **{k: str(v) for k, v in options.items()}}  # fmt: skip
    return "sqs://?" + "&".join(f"{k}={v}" for k, v in opts.items())


def speed_up_moto() -> list[Any]:
    """Take two O(queue length) steps out of moto's per-message paths (same answers).

    moto 5.2 reads the clock through ``datetime`` arithmetic (~5 us a call,
    millions of calls per receive on a few hundred messages) and checks each
    received message's retention by computing *all* queue attributes,
    including the approximate counts (a scan of the queue per message). The
    patches answer the same from ``time.time()`` and the queue's own
    retention field; without them the sqs tests take about 3x longer.
    Returns the undo functions.
    """
    import moto.sqs.models as models

    cls = models.SQSBackend
    names = ("unix_time", "unix_time_millis")
    if not all(hasattr(models, n) for n in names) or not hasattr(cls, RETENTION):
        return []  # another moto: run it as it is
    saved = [getattr(models, n) for n in names] + [getattr(cls, RETENTION)]
    slow = saved[0]

    def unix_time(dt: Any = None) -> float:
        return time.time() if dt is None else float(slow(dt))

    def retention_ok(self: Any, queue_name: str, message: Any) -> bool:
        period = int(self.get_queue(queue_name).message_retention_period)
        return bool(period + message.sent_timestamp / 1000 > time.time())

    def undo() -> None:
        for name, value in zip(names, saved, strict=False):
            setattr(models, name, value)
        setattr(cls, RETENTION, saved[2])

    setattr(models, "unix_time", unix_time)  # noqa: B010 - the names moto's SQS module reads
    setattr(models, "unix_time_millis", lambda dt=None: unix_time(dt) * 1000.0)  # noqa: B010
    setattr(cls, RETENTION, retention_ok)
    return [undo]


def deleted_handles(queue_name: str) -> set[str]:
    """Every receipt handle moto accepted a delete for, on queues named ``queue_name``.

    What the server really did, for tests that must tell a delete that landed
    before its caller was killed from a message that vanished.
    """
    from moto.sqs.models import sqs_backends

    out: set[str] = set()
    for account in sqs_backends.values():
        for backend in account.values():
            queue = backend.queues.get(queue_name)
            if queue is not None:
                out |= set(queue.deleted_messages)
    return out


def serialize_deletes() -> list[Any]:
    """Run moto's ``Queue.delete_message`` under the queue's own message lock.

    moto 5 rebuilds a queue's message list on every delete without the lock
    its sends and receives hold, so two concurrent DeleteMessageBatch calls
    (or a delete racing a send) can put a deleted message back or drop a sent
    one: found by the chaos suite as jobs completed twice on SQS. Real SQS
    does not do this. Returns the undo function.
    """
    import moto.sqs.models as models

    queue = models.Queue
    if not hasattr(queue, "delete_message"):
        return []
    unlocked = queue.delete_message

    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:
            unlocked(self, receipt_handle)

    def undo() -> None:
        queue.delete_message = unlocked

    queue.delete_message = delete_message
    return [undo]


class WallClock:
    """The real clock with FakeClock's interface, for backends whose timers run on a server.

    ``advance`` sleeps, and only for short steps: a test that moves time
    further needs ``requires(CLOCK)`` (see capability.py).
    """

    def __call__(self) -> int:
        return now_ms()

    @property
    def now(self) -> int:
        return now_ms()

    def advance(self, ms: int) -> int:
        if ms > 100:
            raise AssertionError(f"the test moves the clock by {ms} ms: mark it requires(CLOCK)")
        time.sleep(ms / 1000)
        return now_ms()
