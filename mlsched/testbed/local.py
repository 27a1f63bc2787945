"""The local testbed (``mlsched demo``): a controller and two agents on this machine,
training for real.

The controller runs in this process on a loopback port; two agents run as their own
processes (``python -m mlsched.agent``), each declaring two stand-in GPUs. A small mix of
ResNet/VGG parameter-server and all-reduce jobs is submitted over gRPC like any client
would, trained on the CPU over several slots by the chosen policy, and summarised per job:
how it launched, admitted, slots, iterations, measured vs predicted iteration time. The
all-reduce job runs as one torchrun per agent; with Horovod installed (``make horovod``) a
Horovod job joins the mix.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from mlsched.controller.server import Controller, ControllerConfig
from mlsched.controller.status import JobStatus
from mlsched.net.ports import free_port_range
from mlsched.trainers.cpu_share import DeviceSlices

__all__ = [
    "DEMO_JOBS",
    "HOROVOD_JOB",
    "agent_command",
    "demo_jobs",
    "demo_report",
    "measure_demo_profile",
    "run_cluster_demo",
]

log = logging.getLogger(__name__)

# Small on purpose: 2 CPU cores train everything. Work units are mini-batches.
_TRAINING = {"num_samples": 1024, "image_size": 16, "timeout_s": 30.0}
_VGG_TRAINING = {**_TRAINING, "image_size": 32}  # five 2x2 poolings need 32 px
#: What the demo's jobs train with, for a profile of them (``demo --measure-profile``).
PROFILE_SHAPE: dict[str, Any] = {
    "batch_size": 16,
    "image_size": _TRAINING["image_size"],
    "image_sizes": (("vgg11-narrow", _VGG_TRAINING["image_size"]),),
}


def _job(job_id: str, model: str, arch: str, batches: int, **kw: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "job_id": job_id,
        "model": model,
        "arch": arch,
        "batch_size": 16,
        "chunks": 2,
        "batches_per_chunk": batches,
        "max_workers": 2,
        "requested_workers": 2,
        "worker": {"gpu": 1, "cpu": 0.5},
        "compute_s": 0.05,
        "training": _TRAINING,
    }
    if arch == "ps":
        job.update(requested_ps=1, ps={"cpu": 0.5})
    job.update(kw)
    return job


#: The Horovod job of the mix (when ``horovod.torch`` imports).
HOROVOD_JOB = _job(
    "resnet20-hvd", "resnet20", "allreduce", 80, gradient_mb=1.1, arrival_slot=1,
    training={**_TRAINING, "backend": "horovod"},
)  # fmt: skip

DEMO_JOBS: list[dict[str, Any]] = [
    _job("resnet20-ps", "resnet20", "ps", 200, sync="async", gradient_mb=1.1),
    _job("vgg11n-ring", "vgg11-narrow", "allreduce", 150, gradient_mb=2.0, training=_VGG_TRAINING),
    _job("resnet20-sync", "resnet20", "ps", 120, sync="sync", gradient_mb=1.1, arrival_slot=1),
    _job("vgg11n-ps", "vgg11-narrow", "ps", 100, gradient_mb=2.0, training=_VGG_TRAINING,
         arrival_slot=2, requested_workers=1),
]  # fmt: skip


def demo_jobs(policy: str | None = None) -> list[dict[str, Any]]:
    """The demo's mix: :data:`DEMO_JOBS`, plus :data:`HOROVOD_JOB` where Horovod imports.
    For a policy that schedules no parameter-server jobs (gadget: ring-all-reduce only) the
    PS jobs are offered as all-reduce jobs of the same model and work, so that the demo
    shows it placing several rings rather than rejecting most of the mix."""
    from mlsched.trainers.allreduce.horovod import horovod_available

    jobs = [*DEMO_JOBS, HOROVOD_JOB] if horovod_available() else list(DEMO_JOBS)
    if policy is not None:
        from mlsched.core.job import Arch
        from mlsched.scheduler.registry import policy_class

        try:
            cls = policy_class(policy)
        except ValueError:
            cls = None  # the controller names what is wrong
        if cls is not None and Arch.PS not in cls.archs:
            jobs = [_as_allreduce(j) if j["arch"] == "ps" else j for j in jobs]
    return jobs


def _as_allreduce(job: dict[str, Any]) -> dict[str, Any]:
    ring = {k: v for k, v in job.items() if k not in ("ps", "requested_ps", "sync")}
    ring["arch"] = "allreduce"
    return ring


def agent_command(
    controller: str, name: str, workdir: Path, ports: str, *, grace_s: float = 20.0,
    slices: DeviceSlices | None = None,
) -> list[str]:  # fmt: skip
    """A local agent standing in two GPUs on the CPU (``python -m mlsched.agent``); with
    ``slices`` each task in a CPU share of its own."""
    argv = [
        sys.executable, "-m", "mlsched.agent", "--controller", controller,
        "--name", name, "--host", "127.0.0.1", "--gpus", "2", "--gpu-type", "cpu",
        "--cpus", "2", "--mem-gb", "4", "--workdir", str(workdir / name),
        "--ports", ports, "--grace", f"{grace_s:g}",
    ]  # fmt: skip
    if slices is not None:
        argv += ["--device-cores", f"{slices.device_cores:g}", "--ps-cores",
                 f"{slices.ps_cores:g}"]  # fmt: skip
    return argv


def run_cluster_demo(
    *,
    policy: str = "fifo",
    slots: int = 8,
    slot_seconds: float = 15.0,
    workdir: Path | None = None,
    jobs: list[dict[str, Any]] | None = None,
    out: Any = None,
    live: bool = True,
    profile: Path | None = None,
    slices: DeviceSlices | None = None,
) -> dict[str, JobStatus]:
    """Run the demo; returns each job's final status. Progress goes to ``out`` (default:
    the current ``sys.stdout``). ``profile``: the runtime model's prior (a profile of
    this machine). ``slices``: each stand-in GPU's CPU slice (``mlsched agent
    --device-cores``)."""
    out = sys.stdout if out is None else out
    tmp = None
    if workdir is None:
        tmp = tempfile.mkdtemp(prefix="mlsched-demo-")
        workdir = Path(tmp)
    workdir.mkdir(parents=True, exist_ok=True)
    ctl = Controller(
        ControllerConfig(
            listen="127.0.0.1:0",
            policy=policy,
            slot_seconds=slot_seconds,
            db=str(workdir / "state.db"),
            checkpoint_root=str(workdir / "checkpoints"),
            heartbeat_s=0.5,
            agent_timeout_s=10.0,
            min_agents=2,
            task_timeout_s=30.0,
            profile=str(profile) if profile is not None else None,
        )
    ).start()
    agents: list[subprocess.Popen[bytes]] = []
    try:
        for i, ports in enumerate((free_port_range(), free_port_range())):
            log_file = open(workdir / f"agent{i}.log", "wb")  # noqa: SIM115 (outlives the block)
            agents.append(
                subprocess.Popen(
                    agent_command(ctl.address, f"agent{i}", workdir, ports, slices=slices),
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        print(
            f"demo: controller {ctl.address} ({policy}, {slot_seconds:g}s slots, "
            f"{slots} slots); agents agent0, agent1; files in {workdir}",
            file=out,
            flush=True,
        )
        ctl.submit(yaml.safe_dump(jobs if jobs is not None else demo_jobs(policy)))
        deadline = time.monotonic() + 60
        while ctl.engine is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if ctl.engine is None:
            raise RuntimeError(f"agents did not register within 60 s (logs in {workdir})")
        _watch(ctl, slots, out, live)
        status = ctl.cluster_status()
        if status.model_error_samples:
            first, last = _model_error_trend(ctl)
            print(
                f"runtime model: mean |predicted - measured| / measured "
                f"{100 * status.model_error_mean_abs:.0f}% over {status.model_error_samples} "
                f"job-slots (first slot measured: {100 * first:.0f}%, last: {100 * last:.0f}%)",
                file=out,
                flush=True,
            )
        return {j.job_id: j for j in ctl.jobs()}
    finally:
        ctl.stop(stop_tasks=True)
        for p in agents:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        for p in agents:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _watch(ctl: Controller, slots: int, out: Any, live: bool) -> None:
    """Print progress every few seconds until every job is final or ``slots`` have run."""
    last = ""
    while True:
        engine = ctl.engine
        assert engine is not None
        jobs = ctl.jobs()
        final = jobs and all(j.state in ("done", "rejected", "failed", "cancelled") for j in jobs)
        if final or engine.slot >= slots:
            break
        line = f"slot {engine.slot:>2}: " + "  ".join(
            f"{j.job_id} {j.state} {100 * j.progress / max(1.0, j.total_work):.0f}%" for j in jobs
        )
        if live and line != last:
            print(line, file=out, flush=True)
            last = line
        time.sleep(2.0)


def _model_error_trend(ctl: Controller) -> tuple[float, float]:
    """Mean relative model error in the first and the last slot with measurements."""
    engine = ctl.engine
    assert engine is not None and engine.model_errors
    by_slot: dict[int, list[float]] = {}
    for e in engine.model_errors:
        by_slot.setdefault(e.slot, []).append(abs(e.relative))
    slots = sorted(by_slot)
    first, last = by_slot[slots[0]], by_slot[slots[-1]]
    return sum(first) / len(first), sum(last) / len(last)


def demo_report(statuses: dict[str, JobStatus]) -> str:
    from mlsched.controller.tables import job_table

    return job_table(list(statuses.values()))


def measure_demo_profile(
    profile: Path, policy: str, slices: DeviceSlices | None, say: Callable[[str], None]
) -> list[tuple[tuple[str, str, int], str]]:
    """The cells the demo's jobs need, measured into ``profile`` as the demo's agents will
    run them (in their slices; a launcher per rank, as a job spread over the two agents
    starts). Returns the cells that failed, each with why."""
    from mlsched.profiling.grid import cells_for_jobs, measure_budget, run_grid
    from mlsched.profiling.measure import SLICED_STEPS, Settings

    settings = Settings(
        steps=SLICED_STEPS if slices else 40, warmup=10, resume_steps=5, **PROFILE_SHAPE,
        device_cores=slices.device_cores if slices else None,
        ps_cores=slices.ps_cores if slices else None,
        ranks_per_node=1,
    )  # fmt: skip
    cells = cells_for_jobs(demo_jobs(policy))
    run = run_grid(cells, settings, profile, say=say, budget=measure_budget(settings))
    return list(run.failed)
