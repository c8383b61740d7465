"""tick() benchmarks: cold start of a fresh interpreter, import cost, throughput.

Prints one JSON document. Targets (issue E): a fresh ``python -c`` that
imports bunq and runs one empty tick on SQLite in <= 150 ms wall; tick over
SQLite with ``max=1000`` at >= 20,000 jobs/s.

    python bench/tick.py [--runs 10] [--jobs 20000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

COLD = """
import time
t0 = time.perf_counter()
import bunq
from bunq.tick import tick
t1 = time.perf_counter()
r = tick("cold", lambda job: None, "sqlite:///{db}")
t2 = time.perf_counter()
import sys
heavy = sorted(m for m in ("croniter", "psycopg", "boto3", "botocore") if m in sys.modules)
print({{"import_ms": (t1 - t0) * 1000, "tick_ms": (t2 - t1) * 1000, "leased": r.leased,
       "heavy_modules": heavy}})
"""


def _env(**extra: str) -> dict[str, str]:
    drop = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUNQ_") and k not in drop}
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return {**env, **extra}


def cold_start(runs: int, fresh_file: bool, bytecode: bool) -> dict[str, Any]:
    """Wall time of ``python -c`` importing bunq and ticking once on an empty queue.

    ``bytecode``: .pyc files are cached (as in an installed package or a Lambda
    zip), else every module is compiled from source on each start. The first
    run is a warm-up (it writes the .pyc files and creates the database).
    """
    walls, imports, ticks, heavy = [], [], [], set()
    with tempfile.TemporaryDirectory() as d:
        for i in range(runs + 1):
            db = f"{d}/cold-{i if fresh_file else 0}.db"
            cache = f"{d}/pyc" if bytecode else tempfile.mkdtemp(dir=d)
            env = _env(PYTHONPYCACHEPREFIX=cache)
            if not bytecode:
                env["PYTHONDONTWRITEBYTECODE"] = "1"
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", COLD.format(db=db)], env=env,
                                 capture_output=True, text=True, check=True)  # fmt: skip
            wall = (time.perf_counter() - t0) * 1000
            inner = eval(out.stdout)  # our own subprocess's dict
            heavy.update(inner["heavy_modules"])
            if i == 0:
                continue
            walls.append(wall)
            imports.append(inner["import_ms"])
            ticks.append(inner["tick_ms"])
    return {"wall_ms_median": _r(statistics.median(walls)), "wall_ms_min": _r(min(walls)),
            "import_ms_median": _r(statistics.median(imports)),
            "tick_ms_median": _r(statistics.median(ticks)), "runs": len(walls),
            "heavy_modules_loaded": sorted(heavy)}  # fmt: skip


def bare_interpreter(runs: int) -> float:
    """Wall time of ``python -c pass``: the floor under any cold start."""
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        walls.append((time.perf_counter() - t0) * 1000)
    return _r(statistics.median(walls))


def import_time() -> dict[str, Any]:
    """``python -X importtime -c 'import bunq.tick'`` (bytecode cached): bunq's import cost."""
    with tempfile.TemporaryDirectory() as d:
        for _ in range(2):  # the first run writes the bytecode
            out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import bunq.tick"],
                                 env=_env(PYTHONPYCACHEPREFIX=d), capture_output=True, text=True,
                                 check=True)  # fmt: skip
    rows = []
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            rows.append((m.group(4), int(m.group(1)), int(m.group(2))))
    cum = {name: total for name, _, total in rows}
    top = sorted(((n, s) for n, s, _ in rows), key=lambda r: -r[1])[:8]
    return {"bunq_cumulative_ms": _r(cum.get("bunq", 0) / 1000),
            "bunq.tick_cumulative_ms": _r(cum.get("bunq.tick", 0) / 1000),
            "slowest_self_ms": {n: _r(s / 1000) for n, s in top}}  # fmt: skip


def throughput(jobs: int, runs: int) -> dict[str, Any]:
    """Jobs/s of ``tick(max=1000)`` with a no-op handler over a SQLite file.

    ``separate``: one ``tick()`` call per batch (each sweeps, fires cron, counts);
    ``loop``: one ``tick(loop_while_more=True)`` call draining everything.
    """
    sys.path.insert(0, str(ROOT))
    from bunq.backends.sql.sqlite import SQLiteBackend
    from bunq.queue import Queue
    from bunq.tick import tick

    rates: dict[str, list[float]] = {"separate": [], "loop": []}
    with tempfile.TemporaryDirectory() as d:
        for run in range(runs):
            for mode, found in rates.items():
                be = SQLiteBackend(f"{d}/tp-{mode}-{run}.db")
                q = Queue("tp", be)
                for i in range(0, jobs, 1000):
                    q.add_bulk([("n", j) for j in range(i, min(i + 1000, jobs))])
                done, t0 = 0, time.perf_counter()
                while True:
                    r = tick("tp", lambda job: None, be, max=1000, loop_while_more=mode == "loop")
                    done += r.succeeded
                    if not r.may_have_more:
                        break
                found.append(done / (time.perf_counter() - t0))
                assert done == jobs, (done, jobs)
                be.close()
    out: dict[str, Any] = {"jobs": jobs, "runs": runs}
    for mode, found in rates.items():
        out[f"{mode}_jobs_per_s_median"] = round(statistics.median(found))
        out[f"{mode}_jobs_per_s_max"] = round(max(found))
    return out


def _r(x: float) -> float:
    return round(x, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--out", help="also write the JSON here")
    a = ap.parse_args()
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "platform": platform.platform(), "load_1m": os.getloadavg()[0]},
        "python_pass_ms": bare_interpreter(a.runs),
        "cold_start_existing_db": cold_start(a.runs, fresh_file=False, bytecode=True),
        "cold_start_new_db": cold_start(a.runs, fresh_file=True, bytecode=True),
        "cold_start_from_source": cold_start(a.runs, fresh_file=False, bytecode=False),
        "import": import_time(),
        "throughput_max_1000": throughput(a.jobs, max(a.runs // 2, 3)),
        "targets": {"cold_start_wall_ms": 150, "jobs_per_s": 20_000},
    }  # fmt: skip
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
