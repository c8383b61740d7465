"""The ``bunq`` command line: subcommands and their exit codes, through ``python -m bunq``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bunq import cli
from bunq.backends import connect
from bunq.errors import BackendUnavailable
from bunq.queue import Queue

ROOT = Path(__file__).resolve().parents[2]
JOBS = """
import os, time

def handle(job):
    if isinstance(job.data, dict) and job.data.get("sleep"):
        open(os.environ.get("MARK", "started"), "w").close()
        time.sleep(job.data["sleep"])
    if job.data == "fail":
        raise ValueError("nope")
    return job.data
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "jobs.py").write_text(JOBS)
    return tmp_path


def env_for(work: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUNQ_")}
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    env["BUNQ_BACKEND"] = f"sqlite:///{work}/cli.db"
    return {**env, **extra}


def bunq(work: Path, *args: str, stdin: str | None = None, **env: str) -> Any:
    return subprocess.run([sys.executable, "-m", "bunq", *args], cwd=work, input=stdin,
                          env=env_for(work, **env), capture_output=True, text=True,
                          timeout=60)  # fmt: skip


@pytest.mark.parametrize("args, code, words", [
    (["frobnicate"], 2, "invalid choice"),
    (["tick", "q", "--max", "many"], 2, "invalid int"),
    (["tick"], 78, "no queue"),
    (["tick", "q", "--handler", "nope:handle"], 78, "cannot import 'nope'"),
    (["tick", "q", "--handler", "jobs:missing"], 78, "no callable 'missing'"),
    (["stats", "--backend", "nosuch://x"], 78, "unknown backend scheme"),
    (["add", "q", "x", "--data", "{oops"], 65, "--data is not valid JSON"),
    (["cron", "add", "c", "--queue", "q", "--job", "j", "--cron", "* *"], 78, "invalid cron"),
    (["add", "q"], 2, "one of the arguments NAME --file is required"),
    (["cron", "add", "c", "--job", "j", "--cron", "* * * * *"], 2, "--queue"),
    (["cron", "add", "c", "--queue", "q", "--job", "j"], 2, "--cron --every"),
    (["cron", "list", "--limit", "3"], 2, "unrecognized arguments: --limit"),
    (["dlq", "purge", "q", "--id", "x"], 2, "unrecognized arguments: --id"),
    (["worker", "q", "--json"], 2, "unrecognized arguments: --json"),
    (["tick", "q", "--deadline", "-5"], 2, "must be at least"),
    (["tick", "q", "--max", "0"], 2, "must be at least 1"),
    (["serve", "--backend", "bogus://x"], 78, "unknown backend scheme"),
])  # fmt: skip
def test_mistakes_get_one_line_and_an_exit_code(
        work: Path, args: list[str], code: int, words: str) -> None:  # fmt: skip
    out = bunq(work, *args)
    assert out.returncode == code, out.stderr
    assert words in out.stderr and "Traceback" not in out.stderr


def test_bad_settings_are_78_for_every_command(work: Path) -> None:
    for args in (["stats"], ["serve", "--port", "0"]):
        out = bunq(work, *args, BUNQ_LOG_LEVEL="LOUD")
        assert out.returncode == 78 and "BUNQ_LOG_LEVEL" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    out = bunq(work, "serve", "--help", BUNQ_HTTP_PORT="-1")  # -1 (no HTTP) is a valid setting
    assert out.returncode == 0, out.stderr


def test_every_documented_exit_code_is_the_one_the_code_uses() -> None:
    """docs/cli.md's table, bunq --help's epilog and bunq.cli.exits say the same codes."""
    import re

    from bunq.cli import exits

    doc = (ROOT / "docs" / "cli.md").read_text().split("## Exit codes", 1)[1].split("##", 1)[0]
    documented = {int(c) for c in re.findall(r"^\| (\d+) \|", doc, re.M)}
    constants = {v for k, v in vars(exits).items() if k.startswith("EX") and isinstance(v, int)}
    in_epilog = {int(c) for c in re.findall(r"(\d+) [a-zA-Z]", exits.EPILOG)}
    assert documented == constants == in_epilog


def test_ctrl_c_is_130(work: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "bunq", "add", "q", "--file", "-"], cwd=work,
                            env=env_for(work), stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write('{"name": "a"}\n')
    proc.stdin.flush()
    deadline = time.monotonic() + 30  # the backend is open: it is reading stdin now
    while not (work / "cli.db").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 130, stderr


def test_backend_unreachable_is_69(work: Path) -> None:
    (work / "adir").mkdir()
    out = bunq(work, "stats", "--backend", f"sqlite:///{work}/adir")
    assert out.returncode == 69 and "Traceback" not in out.stderr


def test_add_stats_tick_dlq(work: Path) -> None:
    assert bunq(work, "add", "q", "one", "--data", '"fail"', "--opts", '{"attempts": 1}'
                ).returncode == 0  # fmt: skip
    lines = "\n".join(json.dumps({"name": "n", "data": i}) for i in range(2500))
    out = bunq(work, "add", "q", "--file", "-", "--json", stdin=lines + "\n\n")
    assert out.returncode == 0 and json.loads(out.stdout) == {"queue": "q", "added": 2500}
    assert "\r" not in out.stderr  # no progress bar when stderr is not a terminal
    stats = json.loads(bunq(work, "stats", "--json").stdout)
    assert stats["q"]["waiting"] == 2501
    out = bunq(work, "tick", "q", "--handler", "jobs:handle", "--max", "1000",
               "--loop-while-more", "--json")  # fmt: skip
    r = json.loads(out.stdout)
    assert out.returncode == 0, out.stderr
    assert (r["succeeded"], r["failed"], r["moved_to_dlq"], r["ticks"]) == (2500, 1, 1, 3)
    dlq = json.loads(bunq(work, "dlq", "list", "q", "--json").stdout)
    assert [e["error"] for e in dlq] == ["ValueError: nope"]  # the message; then its stack
    assert dlq[0]["stacktrace"][0] == "ValueError: nope" and len(dlq[0]["stacktrace"]) > 1
    assert json.loads(bunq(work, "dlq", "retry", "q", "--json").stdout) == {"retried": 1}
    assert bunq(work, "tick", "q", "--handler", "jobs:handle").returncode == 0
    assert json.loads(bunq(work, "dlq", "purge", "q", "--json").stdout) == {"purged": 1}


def test_bulk_add_from_a_file_reports_the_bad_line(work: Path) -> None:
    (work / "jobs.jsonl").write_text('{"name": "a"}\n{"data": 1}\n')
    out = bunq(work, "add", "q", "--file", "jobs.jsonl")
    assert out.returncode == 65 and "line 2" in out.stderr


def test_cron_and_migrate(work: Path) -> None:
    out = bunq(work, "cron", "add", "nightly", "--queue", "q", "--job", "report",
               "--cron", "0 3 * * *", "--tz", "Europe/Paris", "--json")  # fmt: skip
    assert out.returncode == 0 and json.loads(out.stdout)["next_run"] > 0
    listed = json.loads(bunq(work, "cron", "list", "--json").stdout)
    assert [s["name"] for s in listed] == ["nightly"]
    assert bunq(work, "cron", "remove", "nightly").returncode == 0
    assert bunq(work, "cron", "remove", "nightly").returncode == 78
    out = bunq(work, "migrate", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["schema_version"] >= 1


def test_demo(work: Path) -> None:
    out = bunq(work, "demo", "--jobs", "300")
    assert out.returncode == 0, out.stderr
    assert "300 succeeded" in out.stdout and (work / "bunq-demo.db").exists()


def test_serve_parses_its_own_options(work: Path) -> None:
    out = bunq(work, "serve", "--help")
    assert out.returncode == 0 and "usage: bunq serve" in out.stdout


BLOCKED = 'raise ModuleNotFoundError("No module named {name!r} (test)", name={name!r})\n'


@pytest.mark.parametrize("args, extra, blocked", [
    (["stats", "--backend", "postgresql://127.0.0.1/test"], "postgres", "psycopg"),
    (["stats", "--backend", "sqs://sqs.us-east-1.amazonaws.com/1/q"], "sqs", "boto3"),
    (["serve", "--backend", "postgresql://127.0.0.1/test", "--port", "0"], "postgres", "psycopg"),
])  # fmt: skip
def test_a_missing_extra_is_named_with_exit_3(work: Path, args: list[str], extra: str,
                                              blocked: str) -> None:  # fmt: skip
    """As on a machine where only `pip install bunq-queue` ran: one line naming the extra."""
    shadow = work / "shadow" / blocked
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(BLOCKED.format(name=blocked))
    pythonpath = f"{work / 'shadow'}{os.pathsep}{ROOT}"
    out = bunq(work, *args, PYTHONPATH=pythonpath)
    assert out.returncode == 3, out.stderr
    assert f"pip install 'bunq-queue[{extra}]'" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_read_only_commands_create_no_file(work: Path) -> None:
    env = {"BUNQ_BACKEND": ""}  # the bunq command's own default: bunq serve's data file
    for args in (["stats"], ["dlq", "list", "q"], ["cron", "list"]):
        out = bunq(work, *args, **env)
        assert out.returncode == 0 and "does not exist yet" in out.stdout, out.stderr
    assert json.loads(bunq(work, "stats", "--json", **env).stdout) == {}
    out = bunq(work, "stats", "--backend", f"sqlite:///{work}/none.db")
    assert out.returncode == 0 and "does not exist yet" in out.stdout
    assert sorted(p.name for p in work.iterdir()) == ["jobs.py"]


def test_a_file_of_the_other_kind_is_named(work: Path) -> None:
    assert bunq(work, "add", "q", "x", "--backend", "memory://?data=engine.db").returncode == 0
    out = bunq(work, "stats", "--backend", "sqlite:///engine.db")
    assert out.returncode == 78 and "memory://?data=" in out.stderr, out.stderr
    assert bunq(work, "add", "q", "x", "--backend", "sqlite:///sql.db").returncode == 0
    out = bunq(work, "stats", "--backend", "memory://?data=sql.db")
    assert out.returncode == 78 and "sqlite:///" in out.stderr, out.stderr


def test_serve_and_the_other_commands_share_one_default(work: Path) -> None:
    """`bunq serve`, then `bunq add` / `bunq stats` with no --backend: they meet in the
    server's data file, reached through the server while it owns the file."""
    env = env_for(work, BUNQ_BACKEND="")
    proc = subprocess.Popen([sys.executable, "-m", "bunq", "serve", "--port", "0",
                             "--http-port", "-1"], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
        assert "listening on tcp" in lines[0] and "bunq stats --backend bunq://" in lines[1]
        assert bunq(work, "add", "q", "hello", BUNQ_BACKEND="").returncode == 0
        out = bunq(work, "stats", "--json", BUNQ_BACKEND="")
        assert out.returncode == 0 and json.loads(out.stdout)["q"]["waiting"] == 1, out.stderr
        assert "reaching it through bunq://127.0.0.1:" in out.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    out = bunq(work, "stats", "--json", BUNQ_BACKEND="")  # the server is gone: the file itself
    assert json.loads(out.stdout)["q"]["waiting"] == 1 and "reaching" not in out.stderr


def test_sigterm_stops_the_tick_after_the_running_job(work: Path) -> None:
    with Queue("q", f"sqlite:///{work}/cli.db") as q:
        q.add_bulk([("slow", {"sleep": 0.3}) for _ in range(20)])
    mark = work / "started"
    proc = subprocess.Popen([sys.executable, "-m", "bunq", "tick", "q", "--handler",
                             "jobs:handle", "--max", "20", "--json"], cwd=work,
                            env=env_for(work, MARK=str(mark)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 20
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 143, stderr
    r = json.loads(stdout)
    assert r["stopped"] == "stopped" and 1 <= r["succeeded"] <= 2 and r["unsettled"] == 0
    with Queue("q", f"sqlite:///{work}/cli.db") as q:
        assert q.counts()["active"] == 0  # nothing left leased


def test_worker_drains_gracefully_on_sigterm(work: Path) -> None:
    with Queue("q", f"sqlite:///{work}/cli.db") as q:
        q.add_bulk([("n", i) for i in range(50)])
    proc = subprocess.Popen([sys.executable, "-m", "bunq", "worker", "q", "--handler",
                             "jobs:handle", "--concurrency", "2"], cwd=work, env=env_for(work),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    with Queue("q", f"sqlite:///{work}/cli.db") as q:
        deadline = time.monotonic() + 20
        while q.counts()["completed"] < 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert q.counts()["completed"] == 50
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    assert "processed 50" in stderr


def test_serve_says_where_it_listens_as_json(work: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "bunq", "serve", "--port", "0", "--http-port",
                             "0", "--json", "-v", "--backend", f"sqlite:///{work}/s.db"],
                            cwd=work, env=env_for(work), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        assert info["listening"] and info["client"].startswith("bunq://127.0.0.1:")
        assert info["tcp"].startswith("127.0.0.1:") and info["backend"].startswith("sqlite:///")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and '"message": "stopped"' in err  # -v accepted; logs on stderr


def test_a_failed_job_in_bunq_worker_is_printed_without_any_flag(work: Path) -> None:
    with Queue("q", f"sqlite:///{work}/cli.db") as q:
        job = q.add("bad", "fail", attempts=2, backoff=60_000)
    proc = subprocess.Popen([sys.executable, "-m", "bunq", "worker", "q", "--handler",
                             "jobs:handle"], cwd=work, env=env_for(work),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    with Queue("q", f"sqlite:///{work}/cli.db") as q:
        deadline = time.monotonic() + 20
        while q.get_job(job.id).attempts < 1 and time.monotonic() < deadline:  # type: ignore[union-attr]
            time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=20)
    [line] = [json.loads(ln) for ln in stderr.splitlines() if job.id in ln]
    assert (line["level"], line["error"], line["retry_in_ms"] > 0) == (
        "WARNING",
        "ValueError: nope",
        True,
    )


def test_a_failed_job_is_visible_without_any_flag(work: Path) -> None:
    with Queue("q", f"sqlite:///{work}/cli.db") as q:
        job = q.add("bad", "fail", attempts=1)
    out = bunq(work, "tick", "q", "--handler", "jobs:handle")
    assert out.returncode == 0
    [line] = [json.loads(ln) for ln in out.stderr.splitlines() if job.id in ln]
    assert (line["level"], line["logger"], line["error"]) == (
        "ERROR",
        "bunq.jobs",
        "ValueError: nope",
    )
    assert (
        line["queue"] == "q" and line["attempt"] == 1 and 'raise ValueError("nope")' in line["exc"]
    )


def test_unsettled_outcomes_exit_75(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    real = connect(f"sqlite:///{tmp_path}/u.db")
    Queue("q", real).add("x")

    class NoSettle:
        def __getattr__(self, name: str) -> Any:
            if name in ("complete", "complete_many", "fail"):

                def refuse(*a: Any, **kw: Any) -> Any:
                    raise BackendUnavailable("injected")

                return refuse
            return getattr(real, name)

    monkeypatch.setattr(cli.backend, "connect", lambda url: NoSettle())
    assert cli.main(["tick", "q", "--handler", "json:dumps", "--json"]) == 75
    out = capsys.readouterr()
    assert json.loads(out.out)["unsettled"] == 1 and "will run again" in out.err
    real.close()
