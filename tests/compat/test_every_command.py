"""Every command bunqueue 2.9.5's server routes is answered by ``bunq serve``.

The command names are read from the npm package's dist (the ``case '<Cmd>':``
labels of ``handler-routes/*.js``, the router ``handler.js`` falls back from to
"Unknown command"), so a new bunqueue release that adds a command fails here.
Each is sent as a raw frame with plausible fields; the answer may be a
success or a typed refusal, never "Unknown command".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from compat.conftest import missing
from server.raw import Raw

DIST = Path(__file__).parent / "js/node_modules/bunqueue/dist/infrastructure/server"
CASE = re.compile(r"case '([A-Za-z]+)':")


# Answered by the webhooks work (helper m-hooks, issue M); the lead removes this set on merge.
def bunqueue_commands() -> set[str]:
    routes = sorted((DIST / "handler-routes").glob("*.js"))
    if not routes:
        missing("npm bunqueue (tests/compat/js: npm ci)")
    names: set[str] = set()
    for path in routes:
        names |= set(CASE.findall(path.read_text()))
    return names


def test_the_dist_routes_104_commands() -> None:
    names = bunqueue_commands()
    assert len(names) == 104, sorted(names)
    assert {"PUSH", "PULL", "ACK", "Cancel", "DashboardQueue", "GetGroupsJobsCount"} <= names


def test_bunq_serve_answers_every_bunqueue_command(compat_server: Any) -> None:
    c = Raw(compat_server.port)
    job = c.call({"cmd": "PUSH", "queue": "q", "name": "j", "data": {}})["id"]
    base = {
        "queue": "q",
        "id": job,
        "jobId": job,
        "groupId": "g",
        "name": "n",
        "token": "x",
        "timeout": 1,
    }
    unknown = []
    for name in sorted(bunqueue_commands()):
        reply = c.call({"cmd": name, **base}, timeout=10)
        if "Unknown command" in str(reply.get("error", "")):
            unknown.append(name)
    assert unknown == []
    c.close()
