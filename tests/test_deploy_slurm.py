"""deploy/slurm/mlsched.sbatch run for real: a single-node Slurm (Debian's slurmctld and
slurmd with munge, as root, on loopback, in a directory of the test's own) takes the script
with ``sbatch``, which starts the controller and an agent with ``srun``, submits the demo's
jobs and follows them; the test sees every one done. Skipped, with the reason, where Slurm
is not installed or its daemons cannot start (not root, no munge).

Plausible bugs this catches: an srun step that does not start (a flag the installed Slurm
lacks), an agent credential others can read (the agent refuses it), the submission racing
the controller's start, a follow loop that never ends or ends before the jobs do."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlsched.net.ports import free_port_range, listen_port
from mlsched.testbed.local import DEMO_JOBS

pytestmark = [pytest.mark.processes, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "deploy" / "slurm" / "mlsched.sbatch"
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol")


def _missing() -> str | None:
    absent = [d for d in DAEMONS if shutil.which(d) is None]
    if absent:
        return (
            f"Slurm not installed ({', '.join(absent)} not found; Debian: slurmctld slurmd munge)"
        )
    if os.geteuid() != 0:
        return "a single-node Slurm here runs its daemons as root"
    return None


def _kill(pidfile: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(pidfile.read_text().split()[0]), signal.SIGTERM)


@pytest.fixture
def slurm(tmp_path: Path) -> Iterator[dict[str, str]]:
    why = _missing()
    if why:
        pytest.skip(why)
    w = tmp_path / "slurm"
    for sub in ("state", "spool", "log", "munge"):
        (w / sub).mkdir(parents=True)
    (w / "munge").chmod(0o700)
    key = w / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = w / "munge" / "munge.sock"
    host = socket.gethostname().split(".")[0]
    conf = w / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                "ClusterName=mlschedtest",
                f"SlurmctldHost={host}(127.0.0.1)",
                f"SlurmctldPort={listen_port()}",
                f"SlurmdPort={listen_port()}",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={sock}",
                "SlurmUser=root",
                "SlurmdUser=root",
                f"StateSaveLocation={w / 'state'}",
                f"SlurmdSpoolDir={w / 'spool'}",
                f"SlurmctldPidFile={w / 'slurmctld.pid'}",
                f"SlurmdPidFile={w / 'slurmd.pid'}",
                f"SlurmctldLogFile={w / 'log' / 'slurmctld.log'}",
                f"SlurmdLogFile={w / 'log' / 'slurmd.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "MpiDefault=none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "ReturnToService=2",
                f"NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN",
                f"PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started = []
    try:
        for cmd, pidfile in (
            (["munged", "-f", f"--key-file={key}", f"--socket={sock}",
              f"--pid-file={w / 'munge' / 'munged.pid'}", f"--log-file={w / 'munge' / 'log'}",
              f"--seed-file={w / 'munge' / 'seed'}"], w / "munge" / "munged.pid"),
            (["slurmctld", "-f", str(conf)], w / "slurmctld.pid"),
            (["slurmd", "-f", str(conf)], w / "slurmd.pid"),
        ):  # fmt: skip
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                pytest.skip(f"{cmd[0]} cannot start here: {(done.stderr or done.stdout)[:300]}")
            started.append(pidfile)
        deadline = time.monotonic() + 30
        while True:
            info = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True,
                                  text=True, timeout=30)  # fmt: skip
            if info.stdout.strip() == "idle":
                break
            if time.monotonic() > deadline:
                pytest.skip(f"the Slurm node never became idle: {info.stdout} {info.stderr}")
            time.sleep(0.5)
        yield env
    finally:
        for pidfile in reversed(started):
            _kill(pidfile)


# A batch job's states after which it does nothing more.
FINAL = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}
    | {"BOOT_FAIL", "DEADLINE"}
)


def _wait(job_id: str, env: dict[str, str], deadline: float) -> dict[str, str]:
    """The batch job's fields once it is final, polled every half second (``sbatch --wait``
    polls at doubling intervals, and noticed the end up to 20 s late)."""
    while True:
        show = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=env,
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        job = dict(kv.split("=", 1) for kv in show.stdout.split() if "=" in kv)
        if job.get("JobState") in FINAL:
            return job
        assert time.monotonic() < deadline, f"job {job_id} not final in time: {job}"
        time.sleep(0.5)


@pytest.mark.timeout(900)
def test_sbatch_runs_a_controller_and_an_agent_and_the_demo_s_jobs_to_the_end(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    work = tmp_path / "submit"
    work.mkdir()
    (work / "jobs.json").write_text(json.dumps(DEMO_JOBS))
    env = {
        **slurm,
        "OMP_NUM_THREADS": "1",
        "MLSCHED": str(Path(sys.executable).parent / "mlsched"),
        "MLSCHED_RUN_DIR": str(work / "run"),
        "MLSCHED_PORT": str(listen_port()),
        "MLSCHED_SLOT_SECONDS": "5",
        "MLSCHED_POLL_SECONDS": "2",
        # This machine has no GPU: its agent stands four in on the CPU, as the demo's do.
        "MLSCHED_AGENT_ARGS": f"--gpus 4 --gpu-type cpu --cpus 2 --mem-gb 8 --ports {free_port_range()}",
    }
    submitted = subprocess.run(
        ["sbatch", "--parsable", f"--output={work / 'out.txt'}", str(SCRIPT), "jobs.json"],
        cwd=work, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job = _wait(submitted.stdout.strip().split(";")[0], env, deadline=time.monotonic() + 840)
    out = (work / "out.txt").read_text() if (work / "out.txt").exists() else ""
    logs = "\n".join(
        f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((work / "run").glob("*.log"))
    )
    assert (job.get("JobState"), job.get("ExitCode")) == ("COMPLETED", "0:0"), (
        f"{job}\n{out}\n{logs}"
    )
    for job in DEMO_JOBS:
        rows = [line for line in out.splitlines() if line.split()[:1] == [job["job_id"]]]
        assert rows and "done" in rows[-1].split(), f"{job['job_id']}:\n{out}\n{logs}"
    token = work / "run" / "agents" / f"{socket.gethostname().split('.')[0]}.token"
    assert token.stat().st_mode & 0o077 == 0
