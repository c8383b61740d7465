"""Cursor pages over Redis (``get_jobs_page``; :mod:`bunq.pages` has the contract).

One ``page.lua`` call per page, resuming after the cursor inside the zsets
that order each state: ready lanes by member (``ZRANGEBYLEX`` from the last
member, exclusive; each FIFO group's lane too, merged), the delayed, active,
waiting-children, done and DLQ zsets by (score, member) — by rank when the
last job is still there, else from its score. O(lanes × (log n + page)).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from ...job import JobState
from ...pages import JobPage, cut, decode, page_limit
from ..base import check_queue_name as _qn
from .errors import translated
from .keys import Keys
from .rows import fields, job_from_hash
from .scripts import SCRIPTS

_LANE = (str,)  # the ready member of the last job
_SCORED = (int, str)  # (score, id)


class RedisPages(ABC):
    """Mixin of RedisBackend: keyset pages of a state's jobs."""

    _r: Any
    keys: Keys

    @abstractmethod
    def _now(self) -> int: ...

    def get_jobs_page(self, queue: str, state: JobState, limit: int = 100,
                      after: str | None = None) -> JobPage:  # fmt: skip
        _qn(queue)
        state = JobState.parse(state)
        limit = page_limit(limit)
        lane = state is JobState.WAITING or state is JobState.PAUSED
        key = None if after is None else decode(state, after, _LANE if lane else _SCORED)
        now = self._now()
        args: list[Any] = [now, state.value, limit + 1, *(key or ())]
        with translated("get_jobs_page"):
            rows = SCRIPTS.page.run(self._r, [self.keys.queue(queue)], args)
        out = []
        for k, flat in rows:
            job = job_from_hash(fields(flat), queue, now)
            out.append(((k.decode(),) if lane else (int(float(k)), job.id), job))
        return cut(state, out, limit)
