"""The package as an operator installs it: ``python -m build`` makes an sdist and a wheel
(the build generates the gRPC stubs; the sdist carries the protos, not generated code), the
wheel goes into a fresh virtual environment with torch installed first, and from outside
the source tree its ``mlsched`` runs a controller, an agent and a submitted job to the end.

Plausible bugs this catches: stubs missing from the wheel (every gRPC command fails to
import), protos missing from the sdist, a runtime import of a build or dev tool
(grpcio-tools, pytest), a dependency left out of the metadata, an entry point that does not
resolve. About 1-2 minutes (a fresh environment); ``make wheel-check``, which CI runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from mlsched.net.ports import free_port_range, listen_port

pytestmark = [pytest.mark.packaging, pytest.mark.processes]

ROOT = Path(__file__).resolve().parent.parent
#: What goes in first, as docs/deploy.md says (this machine's CPU build).
TORCH = os.environ.get("MLSCHED_TORCH_REQUIREMENT", "torch==2.13.0")


def _run(cmd: list[str], cwd: Path, timeout: float = 600) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _one(paths: list[Path]) -> Path:
    assert len(paths) == 1, paths
    return paths[0]


@pytest.mark.timeout(900)
def test_the_wheel_installs_alone_and_runs_a_cluster(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], cwd=tmp_path)
    sdist, wheel = _one(list(dist.glob("*.tar.gz"))), _one(list(dist.glob("*.whl")))
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    assert any(n.endswith("protos/mlsched/v1/jobs.proto") for n in names)
    generated = [n for n in names if n.partition("/")[2].startswith("mlsched/v1/")]
    assert not generated, f"generated stubs in the sdist: {generated}"
    with zipfile.ZipFile(wheel) as whl:
        inside = set(whl.namelist())
        metadata = whl.read(next(n for n in inside if n.endswith("METADATA"))).decode()
    assert {"mlsched/v1/jobs_pb2.py", "mlsched/v1/agent_pb2_grpc.py"} <= inside
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    runtime = [r for r in requires if "extra ==" not in r]
    assert not any(tool in r for r in runtime for tool in ("grpcio-tools", "pytest", "ruff"))
    assert any(r.startswith("Requires-Dist: grpcio>=") for r in runtime)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    py, mlsched = venv / "bin" / "python", venv / "bin" / "mlsched"
    _run([str(py), "-m", "pip", "install", "-q", TORCH], cwd=tmp_path)
    _run([str(py), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp_path)
    probe = "import importlib.util as u; print([m for m in ('grpc_tools', 'pytest', 'ruff', 'mypy') if u.find_spec(m)])"
    assert _run([str(py), "-c", probe], cwd=tmp_path).strip() == "[]"
    where = _run([str(py), "-c", "import mlsched; print(mlsched.__file__)"], cwd=tmp_path)
    assert str(venv) in where, f"imported from outside the environment: {where}"
    assert _run([str(mlsched), "--version"], cwd=tmp_path).strip().startswith("mlsched ")

    address = f"127.0.0.1:{listen_port()}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    logs = tmp_path / "logs"
    logs.mkdir()
    commands = {
        "controller": [str(mlsched), "controller", "--listen", address,
                       "--db", str(tmp_path / "state.db"),
                       "--checkpoint-root", str(tmp_path / "ckpt"),
                       "--slot-seconds", "2", "--heartbeat", "0.5"],
        "agent": [str(mlsched), "agent", "--controller", address, "--name", "a1",
                  "--host", "127.0.0.1", "--gpus", "1", "--gpu-type", "cpu", "--cpus", "2",
                  "--mem-gb", "4", "--workdir", str(tmp_path / "agent"),
                  "--ports", free_port_range()],
    }  # fmt: skip
    procs = []
    try:
        for name, cmd in commands.items():
            out = open(logs / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
            procs.append(
                subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            )  # fmt: skip
            time.sleep(1.0 if name == "controller" else 0.0)
        job = {
            "job_id": "w1", "model": "mlp", "arch": "allreduce", "batch_size": 8,
            "chunks": 1, "batches_per_chunk": 20, "max_workers": 1, "requested_workers": 1,
            "worker": {"gpu": 1, "cpu": 0.5}, "compute_s": 0.01, "gradient_mb": 0.1,
            "training": {"num_samples": 256, "image_size": 8, "timeout_s": 30.0},
        }  # fmt: skip
        (tmp_path / "jobs.json").write_text(json.dumps([job]))
        deadline = time.monotonic() + 60
        while True:  # the controller may still be opening its port
            done = subprocess.run(
                [str(mlsched), "submit", "jobs.json", "--controller", address],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        assert done.returncode == 0, done.stderr + _logs(logs)
        state = ""
        deadline = time.monotonic() + 240
        while state not in ("done", "failed") and time.monotonic() < deadline:
            time.sleep(1.0)
            status = _run([str(mlsched), "status", "--json", "--controller", address], tmp_path)
            jobs = {j["jobId"]: j for j in json.loads(status)["jobs"]}  # protobuf's JSON names
            state = jobs["w1"]["state"]
        assert state == "done", f"job w1 is {state}:\n{status}\n{_logs(logs)}"
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)


def _logs(where: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(where.glob("*")))
