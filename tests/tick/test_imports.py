"""Cold start: importing bunq (and ticking an empty queue) loads no heavy optional module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("croniter", "psycopg", "psycopg_pool", "boto3", "botocore", "prometheus_client")


def test_import_and_an_empty_tick_load_nothing_heavy(tmp_path: Path) -> None:
    code = (
        "import sys, bunq, bunq.cron, bunq.cli\n"
        "from bunq.tick import tick\n"
        f"r = tick('q', lambda job: None, 'sqlite:///{tmp_path}/c.db')\n"
        f"print(r.leased, sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "[]"]


def test_croniter_loads_only_when_a_cron_expression_is_used(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from bunq.backends import connect\n"
        "from bunq.cron import Schedule, Scheduler\n"
        f"s = Scheduler(connect('sqlite:///{tmp_path}/c.db'))\n"
        "s.add(Schedule('i', 'q', 'j', every_ms=1000))\n"
        "before = 'croniter' in sys.modules\n"
        "s.add(Schedule('c', 'q', 'j', cron='* * * * *'))\n"
        "print(before, 'croniter' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "True"], out.stderr
