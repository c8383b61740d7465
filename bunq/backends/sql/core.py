"""What every part of the SQL backend stands on: transactions, units of work, deletes.

:class:`SqlCore` is the abstract base of :class:`~.store.SqlBackend` and of its
parts (:mod:`.admin`, :mod:`.sweep`, :mod:`.groups`): a dialect backend
(:mod:`.sqlite`, :mod:`.postgres`) implements its abstract methods, once, and
every part sees them. A new part is one more class over ``SqlCore`` added to
``SqlBackend``'s bases.

Every public operation is one **unit of work** (:func:`unit_of_work`): the
decorator declares whether running it again is safe after its COMMIT's answer
was lost, and hands the call to :meth:`SqlCore._run_unit`. SQLite runs it once;
PostgreSQL retries transient failures within that rule (``postgres.py``).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from ...job import JobId
from ..base import Clock
from .queries import Dialect, values_rows

P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S", bound="SqlCore")


class Tx(Protocol):
    """One open transaction: run a named statement, get all rows back."""

    def q(self, _stmt: str, /, **params: Any) -> list[tuple[Any, ...]]: ...
    def many(self, _stmt: str, rows: list[dict[str, Any]]) -> None: ...
    def sql(self, text: str, params: dict[str, Any]) -> list[tuple[Any, ...]]: ...
    def raw(self, sql: str) -> None: ...


def unit_of_work(*, idempotent: bool) -> Callable[[Callable[Concatenate[S, P], T]],
                                                  Callable[Concatenate[S, P], T]]:  # fmt: skip
    """Declare a public method one unit of work, run through :meth:`SqlCore._run_unit`.

    ``idempotent=True``: a repeat after a COMMIT whose answer was lost is safe (a lost
    lease expires and is swept; a settle or extend re-checks its fence and answers
    STALE; the rest converge). ``False``: repeated only when the transaction surely
    rolled back, since a repeat could apply twice (a log line, a kv write).
    A unit never calls another unit (retries would nest).
    """

    def wrap(fn: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
        @functools.wraps(fn)
        def run(self: S, /, *args: P.args, **kw: P.kwargs) -> T:
            return self._run_unit(functools.partial(fn, self, *args, **kw), idempotent)

        return run

    return wrap


class SqlCore(ABC):
    """Transactions, wake-ups and deletes, shared by the SQL backend's parts."""

    clock: Clock
    dialect: Dialect
    _sql: dict[str, str]
    _batch_cache: dict[tuple[str, int], str]
    max_stalls: int
    completed_max_age: int
    completed_max_count: int

    # -- supplied by the dialect backend -----------------------------------------------
    @abstractmethod
    def _begin(self, durable: bool = True) -> AbstractContextManager[Tx]:
        """A write transaction, committed when the block ends.

        ``durable=False``: the commit need not wait for the flush to disk, because
        losing it in a server crash is harmless (a claim or a completion undone: the
        job is leased again, at least once). A dialect may ignore it.
        """

    @abstractmethod
    def _read(self) -> AbstractContextManager[Tx]:
        """A read-only transaction (or autocommit statements)."""

    @abstractmethod
    def _ring(self, queue: str) -> None:
        """Tell waiting workers that ``queue`` may have work (after commit)."""

    @abstractmethod
    def wait(self, queue: str, timeout_ms: int) -> bool:
        """Block until ``queue`` may have work or ``timeout_ms`` passes."""

    @abstractmethod
    def close(self) -> None:
        """Release connections and threads."""

    def _run_unit(self, work: Callable[[], T], idempotent: bool) -> T:
        """Run one unit of work (see :func:`unit_of_work`); here, once."""
        return work()

    def _ring_on_commit(self, tx: Tx, queue: str) -> bool:
        """Attach the wake-up of ``queue`` to ``tx``'s commit if the dialect can (True)."""
        return False

    @abstractmethod
    def _lock_key(self, tx: Tx, key: str) -> None:
        """Serialise transactions on one identity (job id, unique key, limited queue).

        PostgreSQL takes a transaction-scoped advisory lock, so two brokers admitting
        the same job id or unique key at once run one after the other and the second
        sees the first's job instead of admitting a duplicate.
        """

    # -- shared by every part ----------------------------------------------------------
    def _forget(self, tx: Tx, ids: Sequence[JobId]) -> None:
        """Delete jobs and what hangs off them: a few set-based statements per 500 ids."""
        for chunk in iter_chunks(list(ids), 500):
            params = {f"v{i}_0": jid for i, jid in enumerate(chunk)}
            for name in ("forget_jobs", "forget_attempts", "forget_logs", "forget_uniq"):
                tx.sql(self._batch_sql(name, len(chunk), 1), params)

    def _batch_sql(self, name: str, n: int, width: int) -> str:
        """Statement ``name`` with its ``{values}`` list rendered for ``n`` rows."""
        key = (name, n)
        sql = self._batch_cache.get(key)
        if sql is None:
            sql = self._sql[name].replace("{values}", values_rows(self.dialect, n, width))
            self._batch_cache[key] = sql
        return sql


def iter_chunks(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]
