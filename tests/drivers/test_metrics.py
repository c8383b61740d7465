"""The drivers' Prometheus metrics: Worker, tick() and Queue.add count into a registry
through the settler's observer; ``bunq tick`` writes them to a textfile or a Pushgateway."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from webhooks.receiver import receiver

import bunq.metrics
from bunq import Queue, Worker, tick
from bunq.errors import ConfigError, UnrecoverableError
from bunq.execution import give_back
from bunq.job import Settle
from bunq.metrics import JobMetrics

ROOT = Path(__file__).resolve().parents[2]


def samples(m: JobMetrics | bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = m if isinstance(m, bytes) else m.text()
    fams = text_string_to_metric_families(text.decode())
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in fams for s in f.samples}


def value(m: JobMetrics | bytes, name: str, queue: str = "q", **labels: str) -> float:
    return samples(m).get((name, tuple(sorted({"queue": queue, **labels}.items()))), 0.0)


def handle(job: Any) -> Any:
    if job.data == "fail":
        raise ValueError("nope")
    if job.data == "dead":
        raise UnrecoverableError("no")
    return job.data


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_tick_counts_what_it_settled(make_backend: Any, kind: str) -> None:
    be, m = make_backend(kind), JobMetrics()
    q = Queue("q", be, metrics=m)
    q.add_bulk([("a", 1), ("b", "fail"), ("c", "dead")])
    q.add("d", 2)
    r = tick("q", handle, be, max=10, metrics=m)
    assert (r.succeeded, r.failed, r.moved_to_dlq) == (2, 2, 1)
    assert value(m, "bunq_jobs_pushed_total") == 4
    assert value(m, "bunq_jobs_pulled_total") == 4
    assert value(m, "bunq_jobs_completed_total") == 2
    assert value(m, "bunq_jobs_failed_total") == 2
    assert value(m, "bunq_jobs_dead_total") == 1
    assert value(m, "bunq_job_duration_seconds_count") == 4
    assert value(m, "bunq_tick_queue_depth") == 1  # "fail" waits for its retry
    assert abs(value(m, "bunq_tick_last_run_timestamp_seconds") - time.time()) < 60


def test_a_worker_counts_into_its_registry(make_backend: Any) -> None:
    be, m = make_backend("sqlite"), JobMetrics()
    Queue("w", be, metrics=False).add_bulk([("a", 1), ("b", "dead")])
    w = Worker("w", handle, be, metrics=m).start()
    try:
        end = time.monotonic() + 10
        while value(m, "bunq_jobs_pulled_total", "w") < 2 and time.monotonic() < end:
            time.sleep(0.02)
    finally:
        w.close()
    assert value(m, "bunq_jobs_completed_total", "w") == 1
    assert value(m, "bunq_jobs_dead_total", "w") == 1
    assert value(m, "bunq_jobs_pushed_total", "w") == 0  # that Queue counted nowhere


def test_given_back_jobs_count_as_released(make_backend: Any) -> None:
    be, m = make_backend("memory"), JobMetrics()
    Queue("q", be).add_bulk([("a", 1), ("b", 2), ("c", 3)])
    leases = be.lease("q", 3, 30_000, "me")
    assert give_back(be, leases, observer=m) == [Settle.OK] * 3
    assert value(m, "bunq_jobs_released_total") == 3 and value(m, "bunq_jobs_pulled_total") == 3


def test_the_process_registry_counts_once_turned_on(make_backend: Any) -> None:
    be = make_backend("memory")
    q = Queue("proc-q", be)  # made before the registry exists: still counts once it does
    reg = bunq.metrics.registry()
    before = value(reg_text := bunq.metrics.default().text(), "bunq_jobs_pushed_total", "proc-q")
    q.add("a", 1)
    tick("proc-q", handle, be)
    after = bunq.metrics.default().text()
    assert value(after, "bunq_jobs_pushed_total", "proc-q") == before + 1
    assert value(after, "bunq_jobs_completed_total", "proc-q") >= 1
    assert reg is bunq.metrics.default().registry and reg_text


def test_bad_metrics_argument_is_a_config_error(make_backend: Any) -> None:
    with pytest.raises(ConfigError):
        Worker("q", handle, make_backend("memory"), metrics="yes")  # type: ignore[arg-type]


def _bunq(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUNQ_")}
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{work}"
    env["BUNQ_BACKEND"] = f"sqlite:///{work}/cli.db"
    return subprocess.run([sys.executable, "-m", "bunq", *args], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_bunq_tick_writes_a_textfile_and_pushes_to_a_gateway(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text("def handle(job):\n    return job.data\n")
    from bunq.backends import connect

    be = connect(f"sqlite:///{tmp_path}/cli.db")
    Queue("cj", be).add_bulk([("a", 1), ("b", 2)])
    be.close()
    prom = tmp_path / "bunq.prom"
    with receiver() as gw:
        gateway = gw.url.rsplit("/", 1)[0]
        out = _bunq(tmp_path, "tick", "cj", "--handler", "jobs:handle",
                    "--metrics-textfile", str(prom), "--pushgateway", gateway)  # fmt: skip
        assert out.returncode == 0, out.stderr
        [push] = gw.requests
    text = prom.read_bytes()
    assert value(text, "bunq_jobs_completed_total", "cj") == 2
    assert value(text, "bunq_tick_queue_depth", "cj") == 0
    assert push.method == "PUT" and push.path == "/metrics/job/bunq_tick/queue/cj"
    assert b"bunq_jobs_completed_total" in push.body


def test_bunq_worker_serves_its_metrics(tmp_path: Path) -> None:
    import signal
    import socket
    import urllib.request

    (tmp_path / "jobs.py").write_text("def handle(job):\n    return job.data\n")
    from bunq.backends import connect

    be = connect(f"sqlite:///{tmp_path}/cli.db")
    Queue("wm", be).add_bulk([("a", 1), ("b", 2)])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUNQ_")}
    env.update(
        PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}", BUNQ_BACKEND=f"sqlite:///{tmp_path}/cli.db"
    )
    proc = subprocess.Popen([sys.executable, "-m", "bunq", "worker", "wm", "--handler",
                             "jobs:handle", "--metrics-port", str(port)], cwd=tmp_path, env=env,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        end, text = time.monotonic() + 20, b""
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    text = r.read()
                if value(text, "bunq_jobs_completed_total", "wm") == 2:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        assert value(text, "bunq_jobs_completed_total", "wm") == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        be.close()
    assert f"metrics at http://127.0.0.1:{port}/metrics" in err
