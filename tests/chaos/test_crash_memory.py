"""kill -9 of the process that owns a memory engine's data file, under load, then reopen.

``memory://?data=FILE``: one process owns the file, so the producers (durable
adds) and the workers run as threads of that process, and the crash takes
them all. Three rounds: a fresh owner recovers the file, produces and works,
and is SIGKILLed; then the test process opens the file and drains it. Every
acknowledged durable add is there; no fence settled twice. A completion is
written behind (not durable), so a crash may undo one acknowledged in its
loss window: that job runs and completes again under a new fence
(``recompleted``), never more than the write-behind bound per kill.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from chaos.ledger import NON_DURABLE_LOSS_BOUND, ledger_dir
from chaos.roles import finish, lines, spawn, wait_for

pytestmark = pytest.mark.slow

ROUNDS = 3


def test_engine_owner_killed_under_load_keeps_every_durable_add(tmp_path: Path) -> None:
    d = ledger_dir(tmp_path)
    url = f"memory://?data={tmp_path / 'engine.db'}"
    for k in range(ROUNDS):
        log = d / f"owner{k}.log"
        owner = spawn("own", url, log, "--durable", "--producers", "2", "--threads", "2",
                      "--sleep", "0.002", "--lease-ms", "1000")  # fmt: skip
        try:
            wait_for(lambda: lines(log, "ack") >= 400 and lines(log, "settled") >= 100,  # noqa: B023
                     60, "the owner to add and settle")  # fmt: skip
        finally:
            owner.send_signal(signal.SIGKILL)
            owner.wait(10)
    t = finish(d, url)  # recovery, then every unfinished job run to its end
    print(f"\nmemory engine owner SIGKILLed x{ROUNDS}: {t.summary()}")
    t.check(settle_commits=False)
    assert len(t.recompleted) <= ROUNDS * NON_DURABLE_LOSS_BOUND
    orphans = t.orphans(f"owner{k}.log" for k in range(ROUNDS))
    assert orphans, "no kill interrupted a running job: the test did not test recovery"
    assert t.not_rerun(orphans, lease_commits=False) == []  # each ran again and completed
