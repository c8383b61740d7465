"""bunqueue's FlowProducer (npm ``bunqueue`` 2.9.5, on bun) against ``bunq serve``: ``PUSHF``.

``tests/compat/js/flows.mjs`` adds a tree over two queues and a chain, reads the
tree back with ``getFlow``, sends a graph with one node bunq refuses (nothing of
it may be stored), then runs workers: children before parents, the chain in order.
"""

from __future__ import annotations

from typing import Any

from compat.test_js_client import run_js

TREE = {
    "name": "root",
    "children": [
        {"name": "c1", "children": []},
        {"name": "c2", "children": [{"name": "g", "children": []}]},
    ],
}


def test_js_flow_producer_add_chain_get_flow_and_rollback(compat_server: Any) -> None:
    out = run_js(compat_server.port, script="flows.mjs")
    assert out["added"] == TREE and out["read"] == TREE
    assert out["readData"] == {"r": 1}  # the client strips its __ keys
    assert out["statesAfterAdd"] == {
        "root": "waiting-children",
        "c1": "waiting",
        "c2": "waiting-children",
        "g": "waiting",
    }
    assert out["chainStates"] == ["waiting", "waiting-children", "waiting-children"]
    assert "invalid queue name 'bad queue!'" in out["rollback"]
    assert out["afterRollback"] == {"root": None, "ok": None}  # one bad node: nothing stored
    order = out["order"]
    assert sorted(order) == ["c1", "c2", "g", "root", "s1", "s2", "s3"]
    assert order.index("g") < order.index("c2") < order.index("root")
    assert order.index("c1") < order.index("root")
    assert order.index("s1") < order.index("s2") < order.index("s3")
    assert out["rootState"] == "completed"
