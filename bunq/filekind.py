"""Which bunq file is this? A stamp in SQLite's header tells the two kinds apart.

The SQLite backend's file (``sqlite:///f.db``) and the memory engine's data
file (``memory://?data=f.db``, what ``bunq serve`` writes) are both SQLite
files with different schemas. Each stamps ``PRAGMA application_id`` when it
first opens a file, so opening one kind as the other is a clear error naming
the URL to use, instead of "no such column". Files written before the stamp
are recognised by their ``jobs`` table.
"""

from __future__ import annotations

from typing import Any

from .errors import ConfigError

SQL_FILE = 0x62715331  # "bqS1"
ENGINE_FILE = 0x62714531  # "bqE1"

_WHAT = {
    SQL_FILE: ("a bunq SQLite backend file", "sqlite:///{path}"),
    ENGINE_FILE: ("a bunq memory-engine data file (bunq serve's)", "memory://?data={path}"),
}


def claim(conn: Any, path: str, kind: int) -> None:
    """Stamp ``conn``'s file as ``kind``, or raise ConfigError if it is the other kind.

    :param conn: an open apsw connection (``conn.execute``).
    """
    stamp = int(conn.execute("PRAGMA application_id").fetchall()[0][0])
    found = stamp or _unstamped(conn)
    if found in (0, kind):
        if stamp == 0:  # stamped once; an open of a stamped file writes nothing
            conn.execute(f"PRAGMA application_id = {kind}")
        return
    what, url = _WHAT.get(found, (f"not a bunq file (application_id {found:#x})", None))
    hint = f"; open it with {url.format(path=path)}" if url else ""
    raise ConfigError(f"{path} is {what}{hint}", path=path)


def _unstamped(conn: Any) -> int:
    """The kind of a file written before the stamp existed (0: new or not bunq's)."""
    cols = {str(r[1]) for r in conn.execute("PRAGMA table_info(jobs)").fetchall()}
    if "priority" in cols:
        return SQL_FILE
    if "meta" in cols:
        return ENGINE_FILE
    return 0
