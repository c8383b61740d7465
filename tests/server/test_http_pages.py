"""The HTTP job lists read keyset pages (Backend.get_jobs_page): on memory and SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from server.httpapi import Api
from server.remote_factory import QUIET

from bunq.backends import connect
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig


@pytest.fixture(params=["memory", "sqlite"])
def api(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Api]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/http.db"
    backend = connect(url)
    with BackgroundServer(backend, ServerConfig(port=0, http_port=0, **QUIET)) as srv:
        assert srv.server.http_port is not None
        yield Api(srv.server.http_port, None)
    backend.close()


def _add(api: Api, n: int, priority: int = 0) -> list[str]:
    body = {"jobs": [{"name": "j", "data": i, "priority": priority} for i in range(n)]}
    return list(api.ok("POST", "/queues/q/jobs/bulk", body)["ids"])


def test_jobs_added_ahead_of_the_cursor_shift_nothing(api: Api) -> None:
    """A position cursor would list a job twice here: every page adds jobs that sort first."""
    ids = _add(api, 9)
    seen: list[str] = []
    cursor = ""
    for _ in range(10):
        page = api.ok("GET", f"/queues/q/jobs/list?state=waiting&limit=2&cursor={quote(cursor)}")
        seen += [j["id"] for j in page["jobs"]]
        if page["next"] is None:
            break
        cursor = page["next"]
        _add(api, 2, priority=9)  # ahead of every cursor
    assert seen == ids
    assert api.ok("GET", "/queues/q/counts")["counts"]["waiting"] == 9 + 2 * 4


def test_a_cursor_is_refused_for_another_state(api: Api) -> None:
    _add(api, 3)
    cursor = api.ok("GET", "/queues/q/jobs/list?state=waiting&limit=1")["next"]
    status, out = api.call("GET", f"/queues/q/jobs/list?state=delayed&cursor={quote(cursor)}")
    assert (status, out["code"]) == (400, "validation") and "cursor" in out["error"]
