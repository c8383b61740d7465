"""The PostgreSQL plain add's INSERT, sent through libpq as a prepared statement.

psycopg's ``cursor.execute`` parses the query for placeholders, adapts every
parameter through its dumpers and keeps its own prepared-statement cache, about 45
Python calls per statement: 45 of a lone add's 112 µs of client CPU on the bench
machine (docs/performance.md, "Session 14"). This statement's parameters are only
``str``, ``int``, ``bytes`` and ``None``, so :class:`PlainInsert` dumps them itself
(text, UTF-8; ``bytes`` in binary) and runs ``PQexecPrepared`` on the connection's
documented ``pgconn``: one prepared statement per row count per connection, named
``bunq_add<n>``, prepared on first use. Errors come back as the exceptions psycopg
raises for the same result (``psycopg.errors.error_from_result``), and a broken
connection as ``OperationalError``, so the caller's handling is the same for both ways.
Any other parameter type, or a connection whose client encoding is not UTF-8, takes
psycopg's way. libpq blocks with the GIL released; a KeyboardInterrupt then takes effect
when the server has answered (psycopg's own wait would cancel the statement).
"""

from __future__ import annotations

import itertools
import re
import weakref
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors as pge
from psycopg import pq

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
_PLACEHOLDER = re.compile("%%|%s")
_GONE = b"26000"  # invalid_sql_statement_name: the server lost the statement (DISCARD ALL)


def numbered(template: str) -> str:
    """``template`` (psycopg's format: ``%s`` placeholders, ``%%`` a percent sign) with
    its placeholders as ``$1, $2, ...``."""
    n = itertools.count(1)
    return _PLACEHOLDER.sub(lambda m: "%" if m.group() == "%%" else f"${next(n)}", template)


def dumped(params: list[Any]) -> tuple[list[bytes | None], list[int]] | None:
    """Each parameter as libpq takes it and its format (0 text, 1 binary); None if one
    is of a type this does not dump (the caller then uses psycopg)."""
    values: list[bytes | None] = []
    formats: list[int] = []
    for v in params:
        t = type(v)
        if t is str:
            values.append(v.encode())
            formats.append(0)
        elif t is int:
            values.append(b"%d" % v)
            formats.append(0)
        elif t is bytes:
            values.append(v)
            formats.append(1)
        elif v is None:
            values.append(None)
            formats.append(0)
        else:
            return None
    return values, formats


class PlainInsert:
    """Runs the plain-add statement for ``n`` rows (``template(n)``, ``%s``
    placeholders) on a connection, preparing it there on first use."""

    def __init__(self, template: Callable[[int], str]) -> None:
        self._template = template
        self._text: dict[int, bytes] = {}
        # per connection: the row counts prepared on it (None: not UTF-8, psycopg's way)
        self._ready: weakref.WeakKeyDictionary[Any, set[int] | None] = weakref.WeakKeyDictionary()

    def run(self, conn: psycopg.Connection[Any], n: int, params: list[Any]) -> bool:
        """Execute for ``n`` rows; False (nothing sent) if psycopg must do it instead."""
        if conn in self._ready:
            ready = self._ready[conn]
        else:
            ready = self._ready[conn] = set() if conn.info.encoding == "utf-8" else None
        args = None if ready is None else dumped(params)
        if ready is None or args is None:
            return False
        pg = conn.pgconn
        name = b"bunq_add%d" % n
        for _ in range(2):
            if n not in ready:
                _check(pg, pg.prepare(name, self._text_for(n)))
                ready.add(n)
            # (libpq takes None as NULL, as psycopg's own dumps pass it; its stub says bytes)
            res = pg.exec_prepared(name, args[0], args[1])  # type: ignore[arg-type]
            if res.status in _OK:
                return True
            if res.error_field(pq.DiagnosticField.SQLSTATE) != _GONE:
                break
            ready.discard(n)  # prepare it again, once
        _check(pg, res)
        return True

    def _text_for(self, n: int) -> bytes:
        text = self._text.get(n)
        if text is None:
            text = self._text[n] = numbered(self._template(n)).encode()
        return text


def _check(pg: Any, res: Any) -> None:
    if res.status in _OK:
        return
    if pg.status != pq.ConnStatus.OK:
        raise psycopg.OperationalError(pg.get_error_message())
    raise pge.error_from_result(res)
