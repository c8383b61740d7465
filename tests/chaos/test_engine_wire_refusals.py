"""Over the wire: a value no store can hold is refused, and never costs another
client's acknowledged add (issue 12, item 1).

Before: a BqAdd with ``delay`` 2**64-1 was admitted by the memory engine; its
write-behind flush then failed and dropped every change of the window, so a
durable PUSH acknowledged in the same window was gone after a restart.
"""

from __future__ import annotations

from pathlib import Path

from server.raw import Raw

from bunq.backends import connect
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig


def test_an_unstorable_bq_add_is_refused_and_a_durable_push_beside_it_is_kept(
    tmp_path: Path,
) -> None:
    url = f"memory://?data={tmp_path / 'served.db'}"
    server = BackgroundServer(connect(url), ServerConfig(port=0, http_port=None),
                              close_backend=True).start()  # fmt: skip
    try:
        raw = Raw(server.port)
        bad_id = raw.send({"cmd": "BqAdd", "groups": [[["bad-1", "q", "j", 1,
                                                        {"delay": 2**64 - 1}]]]})  # fmt: skip
        push_id = raw.send({"cmd": "PUSH", "queue": "q", "data": 2, "durable": True})
        replies = {}
        while len(replies) < 2:
            reply = raw.recv(10)
            replies[reply["reqId"]] = reply
        group = replies[bad_id]["results"][0]
        assert group["ok"] is False and group["code"] == "validation"
        assert replies[push_id]["ok"] is True
        pushed = replies[push_id]["id"]
    finally:
        server.stop()
    again = connect(url)
    try:
        assert again.get_job(pushed) is not None
        assert again.get_job("bad-1") is None
    finally:
        again.close()
