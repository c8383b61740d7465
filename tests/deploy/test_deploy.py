"""deploy/*.yaml and the Dockerfile: valid, hardened, and consistent with the CLI.

kubernetes-validate and hadolint come with the test extra; locally a missing one
skips its test, in CI (CI set) it fails.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import required_tool as tool

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy").glob("*.yaml"))
K8S = "1.31.0"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def pod_specs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in MANIFESTS:
        for d in docs(path):
            spec = d["spec"]
            tpl = spec.get("jobTemplate", {}).get("spec", spec).get("template")
            if tpl:
                out.append((f"{path.name}:{d['metadata']['name']}", tpl["spec"]))
    return out


def test_there_are_manifests_for_serve_worker_and_tick() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for p in MANIFESTS for d in docs(p)}
    assert {("Deployment", "bunq"), ("Deployment", "bunq-worker"),
            ("CronJob", "bunq-tick"), ("Service", "bunq")} <= kinds  # fmt: skip


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifests_validate_strictly(path: Path) -> None:
    out = subprocess.run([tool("kubernetes-validate"), "--strict", "-k", K8S, str(path)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("name, spec", pod_specs(), ids=[n for n, _ in pod_specs()])
def test_every_pod_is_hardened(name: str, spec: dict[str, Any]) -> None:
    assert spec["automountServiceAccountToken"] is False
    pod = spec["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
    assert pod["seccompProfile"]["type"] == "RuntimeDefault"
    for c in spec["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert "/tmp" in {m["mountPath"] for m in c.get("volumeMounts", [])}  # writable /tmp
        assert c["resources"]["limits"]["memory"]


def test_the_server_is_probed_and_never_runs_twice_on_its_volume() -> None:
    [dep] = [d for d in docs(ROOT / "deploy" / "serve.yaml") if d["kind"] == "Deployment"]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    [c] = dep["spec"]["template"]["spec"]["containers"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert {p["containerPort"] for p in c["ports"]} == {6789, 6790}


def test_the_worker_probe_reads_the_file_the_worker_touches() -> None:
    [dep] = docs(ROOT / "deploy" / "worker.yaml")
    [c] = dep["spec"]["template"]["spec"]["containers"]
    health = c["args"][c["args"].index("--health-file") + 1]
    assert c["args"][0] == "worker" and health in " ".join(c["livenessProbe"]["exec"]["command"])


def test_the_cronjob_never_overlaps_and_stops_before_its_deadline() -> None:
    [doc] = docs(ROOT / "deploy" / "cronjob.yaml")
    spec, job = doc["spec"], doc["spec"]["jobTemplate"]["spec"]
    assert (spec["concurrencyPolicy"], job["backoffLimit"]) == ("Forbid", 0)
    assert spec["startingDeadlineSeconds"] > 0 and job["activeDeadlineSeconds"] < 300
    [c] = job["template"]["spec"]["containers"]
    assert c["command"] == ["bunq"] and c["args"][0] == "tick"
    assert float(c["args"][c["args"].index("--deadline") + 1]) < job["activeDeadlineSeconds"]
    assert {2, 78} <= set(job["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"])


def test_the_dockerfile_lints_and_runs_as_a_user_from_a_built_wheel() -> None:
    text = (ROOT / "Dockerfile").read_text()
    out = subprocess.run([tool("hadolint"), str(ROOT / "Dockerfile")], capture_output=True,
                         text=True, check=False)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert text.count("\nFROM ") + text.startswith("FROM ") >= 2  # multi-stage
    assert "pip wheel" in text and "--no-index" in text and "USER 10001" in text
    assert 'ENTRYPOINT ["bunq"]' in text
