"""The Lambda artefact `sam build` makes (Makefile, BuildMethod: makefile) runs on its own.

The Makefile installs bunq (pure-Python core) and its dependencies as wheels for the
function's runtime into a folder, with handlers/ and the job code. This test builds it
for a Python found on this machine (the template's 3.12 where present), then imports the
handler from that folder alone (``python -S -I``: no site-packages) and runs a tick.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = "3.12"  # template.yaml Globals.Function.Runtime

RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
from bunq import _core
from bunq.queue import Queue
import handlers.aws_lambda as h

with Queue("emails", sys.argv[2]) as q:
    q.add_bulk([("n", i) for i in range(5)])

class Ctx:
    aws_request_id = "req-1"
    def get_remaining_time_in_millis(self):
        return 30_000

out = h.handler({"queue": "emails"}, Ctx())
print(json.dumps({"impl": _core.IMPLEMENTATION, "out": out, "file": h.__file__,
                  "bunq": _core.__file__}))
"""


def interpreter() -> tuple[str, str]:
    """A Python of the template's runtime if this machine has one, else this one."""
    found = shutil.which(f"python{RUNTIME}") or next(
        iter(sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{RUNTIME}.*/bin/python3")))),
        None,
    )
    if found and subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0:
        return found, RUNTIME
    return sys.executable, f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.mark.slow
def test_the_lambda_artefact_runs_a_tick_on_its_own(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.fail("make is needed to build the Lambda artefact (apt-get install make)")
    python, version = interpreter()
    art = tmp_path / "art"
    build = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "lambda", f"ARTIFACTS_DIR={art}",
         f"PYTHON={sys.executable}", f"LAMBDA_PYTHON={version}", "LAMBDA_CODE="],
        capture_output=True, text=True, timeout=600, env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    assert (art / "handlers" / "aws_lambda.py").exists() and (art / "bunq" / "py.typed").exists()
    assert not list(art.glob("tests")) and not list((art / "bunq" / "_core").glob("*.so"))
    env = {"BUNQ_BACKEND": f"sqlite:///{tmp_path}/jobs.db", "BUNQ_HANDLER": "builtins:repr",
           "BUNQ_QUEUE": "emails", "PATH": os.environ.get("PATH", "")}  # fmt: skip
    run = subprocess.run([python, "-S", "-I", "-c", RUN, str(art), env["BUNQ_BACKEND"]],
                         capture_output=True, text=True, timeout=120, env=env,
                         cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["impl"] == "python" and got["bunq"].startswith(str(art))
    assert got["file"].startswith(str(art))
    assert (got["out"]["succeeded"], got["out"]["failed"]) == (5, 0)
