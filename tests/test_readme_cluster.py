"""The README's cluster block, run as written on loopback: secrets, ``mlsched certs``, a
controller over mutual TLS with a user token and an agent secret, an agent with its own
credential and certificate, a user of the users file with her own token and a context,
then whoami, submit, status, describe, cancel, logs and audit.

What changes to run it here, and only this: the addresses (10.0.0.5 and 10.0.0.12 become
127.0.0.1, ctl.example.org becomes localhost, the ports free ones), ``/shared/ckpt`` a
temporary directory, the slot 2 s instead of 600, ``.venv/bin/mlsched`` this environment's,
the agent's machine two stand-in GPUs on the CPU (``--gpus 2 --gpu-type cpu``; a GPU
machine finds its own), and ``JOB`` the job ids of the test's ``jobs.yaml``. A README whose
commands do not work (a missing TLS flag on a client, a credential file others can read, a
certificate without the name clients dial) fails here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_helpers import stop_all

from mlsched.net.ports import free_port_range, listen_port

pytestmark = pytest.mark.processes

README = Path(__file__).resolve().parent.parent / "README.md"
MARK = "tests/test_readme_cluster.py"


def block() -> list[str]:
    """The logical lines of the bash block the README marks as this test's."""
    text = README.read_text(encoding="utf-8")
    at = text.index(MARK)
    body = text[text.index("```bash\n", at) + len("```bash\n") :]
    body = body[: body.index("```")]
    lines, current = [], ""
    for raw in body.splitlines():
        current += raw.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        line = re.sub(r"\s+#\s.*$", "", current).strip()
        current = ""
        if line and not line.startswith("#"):
            lines.append(re.sub(r"\s+", " ", line))
    return lines


def test_the_readme_block_names_what_an_operator_needs() -> None:
    text = " ".join(block())
    for needed in ("mlsched certs", "mlsched controller", "--tls-ca pki/ca.pem",
                   "mlsched agent ", "--tls-cert pki/gpu-a.pem", "mlsched context set",
                   "mlsched submit", "mlsched status", "mlsched cancel", "mlsched logs",
                   "mlsched user add", "--users-file", "mlsched describe", "mlsched audit"):  # fmt: skip
        assert needed in text, needed


@pytest.mark.timeout(300)
def test_the_readme_cluster_block_runs_as_written_on_loopback(tmp_path: Path) -> None:
    port, metrics = listen_port(), listen_port()
    mlsched = str(Path(sys.executable).parent / "mlsched")
    subs = [
        (".venv/bin/mlsched", mlsched),
        ("10.0.0.5", "127.0.0.1"),
        ("10.0.0.12", "127.0.0.1"),
        ("ctl.example.org", "localhost"),
        (":50051", f":{port}"),
        (":9464", f":{metrics}"),
        ("/shared/ckpt", str(tmp_path / "ckpt")),
        ("--slot-seconds 600", "--slot-seconds 2"),
        ("--name gpu-a", f"--name gpu-a --gpus 2 --gpu-type cpu --cpus 2 --mem-gb 4 "
                         f"--ports {free_port_range()}"),
        ("cancel JOB", "cancel j2"),
        ("logs JOB", "logs j1"),
        ("describe JOB", "describe j1"),
    ]  # fmt: skip
    job = {
        "model": "mlp", "arch": "allreduce", "batch_size": 8, "chunks": 1,
        "max_workers": 1, "requested_workers": 1, "worker": {"gpu": 1, "cpu": 0.5},
        "compute_s": 0.01, "gradient_mb": 0.1,
        "training": {"num_samples": 256, "image_size": 8, "timeout_s": 30.0},
    }  # fmt: skip
    jobs = [{**job, "job_id": "j1", "batches_per_chunk": 20},
            {**job, "job_id": "j2", "batches_per_chunk": 10_000_000}]  # fmt: skip
    (tmp_path / "jobs.yaml").write_text(json.dumps(jobs))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MLSCHED_CONFIG": str(tmp_path / "config.yaml")}
    background: list[subprocess.Popen[bytes]] = []
    outputs: dict[str, str] = {}
    try:
        for line in block():
            for old, new in subs:
                line = line.replace(old, new)
            if line.endswith("&"):
                log = open(tmp_path / f"bg{len(background)}.log", "wb")  # noqa: SIM115
                background.append(
                    subprocess.Popen(["bash", "-c", line[:-1]], cwd=tmp_path, env=env,
                                     stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
                )  # fmt: skip
                continue
            outputs[line] = _until_it_works(line, tmp_path, env, background)
            if " status" in line:  # the job that finishes, before the cancel and the logs
                _wait_done(mlsched, "j1", tmp_path, env, background)
        # A cancel is heard at the next slot boundary, which a loaded machine may delay.
        _wait_done(mlsched, "j2", tmp_path, env, background, "cancelled")
        final = json.loads(_shell(f"{mlsched} status --json", tmp_path, env).stdout)
        states = {j["jobId"]: (j["state"], j["owner"]) for j in final["jobs"]}
        assert states == {"j1": ("done", "alice"), "j2": ("cancelled", "alice")}, states
        assert "alice (user); quota: gpus 8, queued 20" in next(
            out for cmd, out in outputs.items() if cmd.endswith(" whoami")
        )
        described = next(out for cmd, out in outputs.items() if " describe j1" in cmd)
        assert "Owner:      alice" in described and "finished" in described
        audit = next(out for cmd, out in outputs.items() if " audit" in cmd)
        assert audit.count(" submit ") == 2 and " cancel " in audit
        agents = final["cluster"]["agents"]
        assert [(a["name"], a["alive"]) for a in agents] == [("gpu-a", True)]
        logs = next(out for cmd, out in outputs.items() if " logs j1" in cmd)
        assert logs.strip(), "the job's log came back empty"
        for name in ("token", "agent-secret", "gpu-a.token", "alice.token", "pki/ca.key",
                     "pki/gpu-a.key"):  # fmt: skip
            assert (tmp_path / name).stat().st_mode & 0o077 == 0, f"{name} is readable by others"
    finally:
        stop_all(background, grace_s=30)


def _shell(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def _until_it_works(
    line: str, cwd: Path, env: dict[str, str], background: list[subprocess.Popen[bytes]]
) -> str:
    """Run ``line``; while the controller is still starting, again (a minute at most)."""
    deadline = time.monotonic() + 60
    while True:
        done = _shell(line, cwd, env)
        if done.returncode == 0:
            return done.stdout
        if time.monotonic() > deadline:
            pytest.fail(f"{line}\n{done.stdout}\n{done.stderr}\n{_logs(cwd)}")
        assert all(p.poll() is None for p in background), _logs(cwd)
        time.sleep(1.0)


def _wait_done(
    mlsched: str, job: str, cwd: Path, env: dict[str, str],
    background: list[subprocess.Popen[bytes]], state: str = "done",
) -> None:  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        done = _shell(f"{mlsched} status --json", cwd, env)
        if done.returncode == 0:
            states = {j["jobId"]: j["state"] for j in json.loads(done.stdout)["jobs"]}
            if states.get(job) == state:
                return
        assert all(p.poll() is None for p in background), _logs(cwd)
        time.sleep(1.0)
    pytest.fail(f"{job} not {state}:\n{_logs(cwd)}")


def _logs(cwd: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(cwd.glob("bg*.log")))
