"""One process owns a data file: an fcntl lock on a sidecar ``<file>.lock``.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on ``<data file>.lock``, which the
owner keeps open (and fills with its pid, host and start time) for its whole
life. The kernel drops the lock when the owner exits, even on SIGKILL, so a
crashed owner never leaves the file locked. A second opener, in this
process or another, gets :class:`~bunq.errors.DataFileLocked` naming the owner.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time

from ..errors import BackendError, DataFileLocked


class FileLock:
    """Hold the exclusive lock on ``path + ".lock"`` until :meth:`release`.

    :raises DataFileLocked: another open holds it; ``data['owner']`` is
        ``{"pid", "host", "since"}`` as the owner wrote it.
    """

    def __init__(self, path: str) -> None:
        self.path = path + ".lock"
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise BackendError(f"cannot open lock file {self.path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            owner = _read_owner(fd)
            os.close(fd)
            raise DataFileLocked(
                f"{path} is owned by pid {owner.get('pid', '?')} on host "
                f"{owner.get('host', '?')}; one process owns a data file",
                path=path,
                owner=owner,
            ) from None
        self._fd: int | None = fd
        self.info: dict[str, object] = {"pid": os.getpid(), "host": socket.gethostname(),
                                        "since": int(time.time())}  # fmt: skip
        self._write()

    def note(self, **info: object) -> None:
        """Add to the owner record (``bunq serve`` notes where it listens, so the
        ``bunq`` command can reach the file's jobs through it)."""
        self.info.update(info)
        self._write()

    def _write(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps(self.info).encode(), 0)

    def release(self) -> None:
        """Let go of the lock (idempotent). The lock file itself stays."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _read_owner(fd: int) -> dict[str, object]:
    try:
        raw = os.pread(fd, 4096, 0)
        owner = json.loads(raw.decode() or "{}")
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}
