"""SQLite's doorbell: a ring reaches every bound waiter, including one bound after
the ringer last listed the folder, in this process or another, and forgets dead ones.

The ringer re-lists ``<db>.bell/`` only when the folder's generation
(``<db>.bell.peers``) moved; these tests fail if a bind, a close or the removal of a
dead socket stops bumping it (the ringer would keep a stale listing).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from bunq.backends.sql.doorbell import Doorbell


def _bound(db: str) -> Doorbell:
    bell = Doorbell(db)
    assert bell.wait(0) is True  # the first wait binds and returns at once
    return bell


def test_a_waiter_bound_after_the_ringer_listed_is_rung(tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    ringer, first = Doorbell(db), _bound(db)
    ringer.ring()  # lists the folder: only ``first``
    assert first.wait(1.0) is True
    late = _bound(db)
    ringer.ring()
    assert late.wait(1.0) is True, "the ringer kept its old listing"
    assert first.wait(1.0) is True
    for b in (ringer, first, late):
        b.close()


def test_a_ring_does_not_stat_or_list_when_nothing_changed(tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    ringer, waiter = Doorbell(db), _bound(db)
    ringer.ring()
    listed = ringer._peers
    ringer.ring()
    assert ringer._peers is listed  # the same listing: no listdir
    assert waiter.wait(1.0) is True
    waiter.close()
    ringer.ring()
    assert ringer._peers == []  # the close bumped the generation: re-listed
    ringer.close()


def test_a_dead_socket_is_removed_and_everyone_re_lists(tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    a, b = Doorbell(db), Doorbell(db)
    dead = Path(db + ".bell") / "deadbeefdeadbeef"
    dead.touch()  # a socket file whose process was killed: sendto is refused
    a.ring()
    assert not dead.exists()
    b_seen = b._gen.read()
    assert b_seen == a._gen.read()
    b.ring()  # b listed nothing before: it lists now, without the dead one
    assert all(not p.endswith("deadbeefdeadbeef") for p in b._peers)
    a.close()
    b.close()


def test_a_waiter_in_another_process_is_rung(tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    ringer = Doorbell(db)
    ringer.ring()  # an empty listing, cached
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from bunq.backends.sql.doorbell import Doorbell
            bell = Doorbell({db!r})
            assert bell.wait(0)
            print("bound", flush=True)
            print("rung" if bell.wait(10.0) else "timeout", flush=True)
        """)],
        stdout=subprocess.PIPE, text=True, env={**os.environ})  # fmt: skip
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "bound"
    ringer.ring()
    assert child.stdout.readline().strip() == "rung"
    assert child.wait(10) == 0
    ringer.close()
