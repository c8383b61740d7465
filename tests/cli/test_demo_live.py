"""`bunq serve` + `bunq demo --live --backend bunq://...`: the dashboard's API sees the demo."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from cli.test_cli import env_for


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def test_demo_live_fills_the_served_queue_until_ctrl_c(tmp_path: Path) -> None:
    env = env_for(tmp_path, BUNQ_BACKEND="memory://")
    cmd = [sys.executable, "-m", "bunq", "serve", "--port", "0", "--http-port", "0", "--json"]
    serve = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    demo = None
    try:
        assert serve.stdout is not None
        where = json.loads(serve.stdout.readline())
        http = f"http://{where['http']}"
        demo = subprocess.Popen([sys.executable, "-m", "bunq", "demo", "--jobs", "10", "--live",
                                 "--rate", "40", "--backend", where["client"]], cwd=tmp_path,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True)  # fmt: skip
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (len(seen) < 2 or seen[-1] <= seen[0]):
            queues = {q["name"]: q for q in _get(f"{http}/queues")["queues"]}
            if "demo" in queues and queues["demo"]["counts"]["completed"] > 10:
                seen.append(queues["demo"]["counts"]["completed"])
            time.sleep(0.5)
        assert len(seen) >= 2 and seen[-1] > seen[0], seen  # still adding and processing
        page = _get(f"{http}/queues/demo/jobs/list?state=completed&limit=5")
        assert len(page["jobs"]) == 5 and page["next"] is not None
        assert b"<title>bunq</title>" in urllib.request.urlopen(f"{http}/", timeout=10).read()
        demo.send_signal(signal.SIGINT)
        out, _ = demo.communicate(timeout=20)
        assert demo.returncode == 0 and "stopped after" in out, out
    finally:
        if demo is not None and demo.poll() is None:
            demo.kill()
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(20) == 0
