"""A counter every process using one SQLite file shares, read without a statement.

Eight bytes in a file beside the database, mapped into each process. It is changed
only inside a write transaction (under SQLite's write lock, so increments never race)
and read inside one, so a reader holding the write lock sees every change committed
before it took the lock: what a ``SELECT`` would see, for the price of a memory read.

:class:`~.events.SqlEventLog` uses it as the generation of the event readers'
registrations: a writer re-reads the registration of a queue only when the
generation moved (or the registration it read has lapsed), not in every transaction.
:class:`~.doorbell.Doorbell` uses another as the generation of its folder of sockets
(:meth:`SharedCounter.bump_anywhere`: a waiter binds outside any transaction).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct

_U64 = struct.Struct("<Q")


class SharedCounter:
    """An unsigned 64-bit counter in ``path`` (created as needed), mapped shared."""

    def __init__(self, path: str) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < _U64.size:  # two creators both extend: still 8 zeros
                os.ftruncate(fd, _U64.size)
            self._map: mmap.mmap | None = mmap.mmap(fd, _U64.size)
        finally:
            os.close(fd)

    def read(self) -> int:
        m = self._map
        return -1 if m is None else _U64.unpack_from(m)[0]

    def bump(self) -> None:
        """Add one (the caller holds the database's write lock)."""
        m = self._map
        if m is not None:
            _U64.pack_into(m, 0, (_U64.unpack_from(m)[0] + 1) & 0xFFFF_FFFF_FFFF_FFFF)

    def bump_anywhere(self) -> None:
        """Add one outside a write transaction: under an exclusive ``flock`` of the file,
        so two processes bumping at once both count (a reader sees the value move)."""
        if self._map is None:
            return
        with contextlib.suppress(OSError):
            fd = os.open(self.path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self.bump()
            finally:
                os.close(fd)  # releases the lock

    def close(self) -> None:
        m, self._map = self._map, None
        if m is not None:
            with contextlib.suppress(BufferError):
                m.close()
