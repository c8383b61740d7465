"""Cursor (keyset) pages of a state's jobs: :class:`JobPage` and its opaque cursor.

``Backend.get_jobs_page(queue, state, limit, after)`` returns one page of the
listing ``get_jobs`` gives by position, in the same order, and ``next``: the
cursor to pass as ``after`` for the page that follows (``None`` on the last
page). The cursor holds the *sort key* of the page's last job, not a position,
so a backend resumes with an index seek (``WHERE key > cursor``) instead of
skipping ``offset`` rows, and jobs added or removed between pages shift
nothing: every job that stays in the state from the first page to the last is
listed exactly once (a job whose sort key changes between two reads, e.g. a
reprioritised one, may be listed twice or skipped, as with any keyset read).

The cursor is opaque to callers: URL-safe base64 of ``[state, key...]``. Each
backend chooses the key of its own order (ints and strings); a cursor given
for another state, or not given by bunq at all, is a ``ValidationError``
(``field="after"``). Cursors are not portable between backends.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from .errors import ValidationError
from .job import Job, JobState
from .validate import integer

MAX_PAGE = 10_000  # jobs in one page, whatever the caller asks
MAX_CURSOR = 1024  # characters

Key = tuple[int | str, ...]


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of jobs; ``next`` is the cursor of the page after it (None: last page)."""

    jobs: list[Job] = field(default_factory=list)
    next: str | None = None


def page_limit(limit: object) -> int:
    """Return ``limit`` checked (an int in [1, 10**9]) and capped at :data:`MAX_PAGE`."""
    return min(integer(limit, "limit", 1, 10**9), MAX_PAGE)


def encode(state: JobState, key: Key) -> str:
    """Return the cursor of a page ending at the job whose sort key is ``key``."""
    raw = json.dumps([state.value, *key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(state: JobState, cursor: object, shape: Sequence[type]) -> Key:
    """Return the key a cursor of ``state`` carries.

    :param shape: the types of the key's parts (``int`` or ``str``).
    :raises ValidationError: not a cursor bunq gave for this state and backend.
    """
    if not isinstance(cursor, str) or not 0 < len(cursor) <= MAX_CURSOR:
        raise ValidationError("the cursor must be the next of a previous page", field="after")
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except ValueError:
        raise ValidationError("the cursor is not one bunq gave", field="after") from None
    if not isinstance(raw, list) or raw[:1] != [state.value]:
        raise ValidationError("the cursor belongs to another listing", field="after")
    key = tuple(raw[1:])
    if len(key) != len(shape) or not all(
        type(v) is t and (t is not int or -(2**63) <= v < 2**63)  # type: ignore[operator]
        for v, t in zip(key, shape, strict=True)
    ):
        raise ValidationError("the cursor is not one of this backend", field="after")
    return key


def cut(state: JobState, rows: Sequence[tuple[Key, Job]], limit: int) -> JobPage:
    """Build the page from up to ``limit + 1`` (key, job) rows in order.

    A row beyond ``limit`` only says that another page follows.
    """
    if len(rows) <= limit:
        return JobPage([job for _, job in rows], None)
    shown = rows[:limit]
    return JobPage([job for _, job in shown], encode(state, shown[-1][0]))
