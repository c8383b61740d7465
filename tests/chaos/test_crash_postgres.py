"""PostgreSQL connections terminated mid-run (``pg_terminate_backend``), and a broker killed.

A producer process and two worker processes share one schema; every
connection they hold (tagged by ``application_name``) is terminated five
times while they run, then a worker is SIGKILLed. They recover by
themselves (adds and settles continue after the last termination); the test
drains and counts: 0 lost, no job completed twice.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from chaos.ledger import ledger_dir
from chaos.roles import finish, lines, spawn, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TERMINATIONS = 5


def test_terminated_connections_lose_nothing_and_settle_once(pg_url: str, tmp_path: Path) -> None:
    import psycopg
    from conftest import PG_DSN

    app = parse_qs(urlparse(pg_url).query)["application_name"][0]
    d = ledger_dir(tmp_path)
    producer = spawn("produce", pg_url, d / "p.log", "--bulk", "10")
    workers = [spawn("work", pg_url, d / f"w{i}.log", "--sleep", "0.002", "--lease-ms", "2000")
               for i in range(2)]  # fmt: skip
    terminated = 0
    try:
        wait_for(lambda: lines(d / "w0.log", "settled") >= 50, 60, "the workers to settle")
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            for _ in range(TERMINATIONS):
                time.sleep(0.5)
                row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                   " WHERE application_name = %s", [app]).fetchone()  # fmt: skip
                terminated += row[0] if row else 0
        acked = lines(d / "p.log", "ack")
        settled = sum(lines(d / f"w{i}.log", "settled") for i in range(2))
        wait_for(lambda: lines(d / "p.log", "ack") >= acked + 200, 60, "adds to resume")
        wait_for(lambda: sum(lines(d / f"w{i}.log", "settled") for i in range(2)) >= settled + 200,
                 60, "settles to resume")  # fmt: skip
        workers[0].send_signal(signal.SIGKILL)  # and a broker dies holding leases
    finally:
        for p in [producer, *workers]:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait(10)
    assert terminated >= TERMINATIONS
    t = finish(d, pg_url)  # recovery, then every unfinished job run to its end
    print(f"\npostgres: {terminated} connections terminated, a worker SIGKILLed: {t.summary()}")
    t.check(settle_commits=True)
