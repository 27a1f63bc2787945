"""GPU acceptance check: what a GPU machine does with mlsched, in one command.

Three parts, each reported even when another fails:

1. NVML: every device's name, memory, utilisation and PCIe/NVLink counters as the agents'
   telemetry reads them; torch's CUDA and NCCL versions.
2. Trainers: one short CUDA run of each trainer kind (PS async, PS sync, DDP under torchrun
   over NCCL, Horovod where it imports) on ResNet-20, and VGG-11 under DDP, with the measured
   iteration times.
3. Testbed: a controller and one agent on loopback, the agent taking one GPU by NVML
   (``--gpus 1``, no stand-ins, its model from NVML), two CUDA jobs trained to done;
   ``mlsched status`` (measured iteration times, the GPU's readings) and the GPU telemetry
   the controller received.

    python scripts/gpu_check.py --out DIR      # (scripts/gpu_check.sh sets the paths up)

Writes DIR/gpu_check.json and prints a summary; exit status 1 when a part failed, 2 when
no GPU is usable here (the reason is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def nvml_part() -> dict[str, Any]:
    import torch

    from mlsched.trainers import telemetry

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "",
        "torch_devices": [
            {
                "index": i,
                "name": torch.cuda.get_device_name(i),
                "memory_bytes": torch.cuda.get_device_properties(i).total_memory,
                "multiprocessors": torch.cuda.get_device_properties(i).multi_processor_count,
            }
            for i in range(torch.cuda.device_count())
        ],
        "nvml_inventory": telemetry.gpu_inventory(),
    }
    nv = telemetry.nvml()
    if nv is not None:
        out["nvml_driver"] = _text(nv.nvmlSystemGetDriverVersion())
        out["nvml_counters"] = [
            {"index": i, **telemetry.gpu_counters(nv, nv.nvmlDeviceGetHandleByIndex(i))}
            for i in range(nv.nvmlDeviceGetCount())
        ]
    return out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


TRAINER_RUNS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("resnet20 ps async", {"model": "resnet20", "arch": "ps", "mode": "async"}),
    ("resnet20 ps sync", {"model": "resnet20", "arch": "ps", "mode": "sync"}),
    ("resnet20 ddp/nccl torchrun", {"model": "resnet20", "arch": "allreduce"}),
    ("vgg11 ddp/nccl torchrun", {"model": "vgg11", "arch": "allreduce"}),
    ("resnet20 horovod", {"model": "resnet20", "arch": "allreduce", "backend": "horovod"}),
)


def trainers_part(work: Path, steps: int, device: str) -> list[dict[str, Any]]:
    from mlsched.core.train_config import TrainConfig
    from mlsched.trainers.allreduce.horovod import horovod_available
    from mlsched.trainers.launch import launch

    rows: list[dict[str, Any]] = []
    for name, kw in TRAINER_RUNS:
        if device == "cpu" and kw["model"] == "vgg11":  # the check mode: CPU-sized
            name, kw = name.replace("vgg11", "vgg11-narrow"), {**kw, "model": "vgg11-narrow"}
        if kw.get("backend") == "horovod" and not horovod_available():
            rows.append({"run": name, "skipped": "horovod.torch does not import here"})
            continue
        ckpt = work / name.replace(" ", "-").replace("/", "-")
        cfg = TrainConfig(
            num_workers=1,
            num_ps=1 if kw["arch"] == "ps" else 0,
            stop_step=steps,
            checkpoint_dir=str(ckpt),
            metrics=str(ckpt / "metrics.jsonl"),
            batch_size=128 if device == "cuda" else 16,
            device=device,
            rendezvous="127.0.0.1:0",
            num_samples=8192 if device == "cuda" else 256,
            image_size=32,
            timeout_s=120.0,
            checkpoint_every_s=0.0,
            job_id=name.split()[0],
            **kw,
        )
        ckpt.mkdir(parents=True, exist_ok=True)
        outcome = launch(cfg)
        s = outcome.summary
        rows.append(
            {
                "run": name,
                "ok": outcome.ok,
                "returncodes": outcome.returncodes,
                "wall_s": round(outcome.wall_s, 2),
                "final_step": s.get("final_step"),
                "samples_per_s": round(float(s.get("samples_per_s", 0.0)), 1),
                "compute_s_per_iter": s.get("compute_time_mean"),
                "comm_s_per_iter": s.get("comm_time_mean"),
                "first_loss": s.get("first_loss"),
                "final_loss": s.get("final_loss"),
                "errors": s.get("errors"),
            }
        )
        print(f"  {rows[-1]}", flush=True)
    return rows


def _gpu_job(job_id: str, model: str, arch: str, batches: int, **kw: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "job_id": job_id,
        "model": model,
        "arch": arch,
        "batch_size": 64,
        "chunks": 2,
        "batches_per_chunk": batches,
        "max_workers": 1,
        "requested_workers": 1,
        "worker": {"gpu": 1, "cpu": 1},
        "compute_s": 0.02,
        "training": {"num_samples": 8192, "image_size": 32, "timeout_s": 120.0},
    }
    if arch == "ps":
        job.update(requested_ps=1, ps={"cpu": 1})
    job.update(kw)
    return job


def testbed_part(work: Path, slot_s: float, deadline_s: float, device: str) -> dict[str, Any]:
    import yaml

    from mlsched.controller.server import Controller, ControllerConfig
    from mlsched.net.ports import free_port_range
    from mlsched.testbed.local import agent_command

    if device == "cuda":
        jobs = [
            _gpu_job("resnet20-ps", "resnet20", "ps", 150, sync="async", gradient_mb=1.1),
            _gpu_job("vgg11-ring", "vgg11", "allreduce", 100, gradient_mb=39.0),
        ]
    else:  # the check mode: the same path on stand-in GPUs, CPU-sized
        small = {"num_samples": 256, "image_size": 16, "timeout_s": 60.0}
        jobs = [
            _gpu_job("resnet20-ps", "resnet20", "ps", 10, gradient_mb=1.1, batch_size=8,
                     training=small),
            _gpu_job("mlp-ring", "mlp", "allreduce", 10, gradient_mb=0.1, batch_size=8,
                     training=small),
        ]  # fmt: skip
    ctl = Controller(
        ControllerConfig(
            listen="127.0.0.1:0",
            policy="fifo",
            slot_seconds=slot_s,
            db=str(work / "state.db"),
            checkpoint_root=str(work / "checkpoints"),
            heartbeat_s=0.5,
            agent_timeout_s=20.0,
            min_agents=1,
            task_timeout_s=120.0,
        )
    ).start()
    # The demo's agent command; on a GPU machine with one real GPU (--gpus 1: the first NVML
    # lists) and no declared type: the model comes from NVML.
    cmd = agent_command(ctl.address, "gpu-agent", work, free_port_range())
    if device == "cuda":
        cut = cmd.index("--gpus")
        cmd = [*cmd[:cut], "--gpus", "1", *cmd[cut + 4 :]]
        i = cmd.index("--cpus")
        cmd[i + 1], cmd[i + 3] = "8", "32"  # --cpus 8 --mem-gb 32
    log_file = open(work / "agent.log", "wb")  # noqa: SIM115 (closed below)
    agent = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    seen_gpu: list[dict[str, Any]] = []
    try:
        ctl.submit(yaml.safe_dump(jobs))
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            for a in ctl.agents.alive():
                t = a.telemetry
                if t is not None and t.nvml and t.gpus:
                    seen_gpu.append(
                        {
                            "t": round(time.monotonic() - (end - deadline_s), 1),
                            "gpus": [
                                {
                                    "index": g.index,
                                    "uuid": g.uuid,
                                    "util": g.util_percent,
                                    "mem": g.mem_used_bytes,
                                    "power": g.power_w,
                                }
                                for g in t.gpus
                            ],
                        }
                    )
            statuses = ctl.jobs()
            if statuses and all(
                j.state in ("done", "rejected", "failed", "cancelled") for j in statuses
            ):
                break
            time.sleep(1.0)
        statuses = ctl.jobs()
        table = _status_command(ctl.address)
        agents = [
            {
                "agent_id": a.agent_id,
                "gpu_type": a.gpu_type,
                "capacity": a.capacity,
                "real_gpus": a.real_gpus,
            }
            for a in ctl.agents.all()
        ]
        cluster = ctl.cluster_status()
        return {
            "jobs": [
                {
                    "job_id": s.job_id,
                    "state": s.state,
                    "reason": s.reason,
                    "launch": s.launch,
                    "iterations": s.iterations,
                    "measured_iteration_s": s.measured_iteration_s,
                    "predicted_iteration_s": s.predicted_iteration_s,
                    "slots_run": s.slots_run,
                }
                for s in statuses
            ],
            "all_done": all(s.state == "done" for s in statuses),
            "table": table,
            "agents": agents,
            "model_error_mean_abs": cluster.model_error_mean_abs,
            "gpu_telemetry_samples": len(seen_gpu),
            "gpu_util_max": max(
                (g["util"] or 0.0 for s in seen_gpu for g in s["gpus"]), default=None
            ),
            "gpu_mem_max": max((g["mem"] or 0 for s in seen_gpu for g in s["gpus"]), default=None),
            "gpu_power_max": max(
                (g["power"] or 0.0 for s in seen_gpu for g in s["gpus"]), default=None
            ),
        }
    finally:
        ctl.stop(stop_tasks=True)
        with contextlib.suppress(ProcessLookupError):
            agent.terminate()
        try:
            agent.wait(timeout=30)
        except subprocess.TimeoutExpired:
            agent.kill()
        log_file.close()


def _status_command(address: str) -> str:
    """What ``mlsched status`` prints (jobs, and the agent's GPU readings), run as a user does."""
    done = subprocess.run(
        [sys.executable, "-m", "mlsched", "status", "--controller", address],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return done.stdout + done.stderr


def _part(report: dict[str, Any], name: str, run: Callable[[], Any], out: Path) -> None:
    print(f"== {name}", flush=True)
    start = time.perf_counter()
    try:
        report[name] = {"ok": True, "result": run()}
    except Exception as err:  # one part failing must not hide the others
        report[name] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
        traceback.print_exc()
    report[name]["seconds"] = round(time.perf_counter() - start, 1)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".", help="directory for gpu_check.json")
    ap.add_argument("--steps", type=int, default=60, help="steps of each trainer run")
    ap.add_argument("--slot-seconds", type=float, default=20.0)
    ap.add_argument("--testbed-deadline", type=float, default=200.0)
    ap.add_argument(
        "--cpu-check",
        action="store_true",
        help="run every part on the CPU (stand-in GPUs, small models): the script's own check",
    )
    args = ap.parse_args(argv)
    device = "cpu" if args.cpu_check else "cuda"
    steps = min(args.steps, 10) if args.cpu_check else args.steps
    if not args.cpu_check:
        sys.path.insert(0, str(ROOT / "tests"))
        from gpu import cuda_skip_reason

        reason = cuda_skip_reason()
        if reason is not None:
            print(f"gpu_check: {reason}")
            return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"host": platform.node()}
    work = Path(tempfile.mkdtemp(prefix="mlsched-gpu-check-"))
    _part(report, "nvml", nvml_part, out)
    _part(report, "trainers", lambda: trainers_part(work / "train", steps, device), out)
    _part(
        report,
        "testbed",
        lambda: testbed_part(work / "testbed", args.slot_seconds, args.testbed_deadline, device),
        out,
    )
    print("== summary")
    nv = report["nvml"].get("result", {})
    for d in nv.get("nvml_counters", []):
        print(f"  NVML gpu {d}")
    for row in report["trainers"].get("result", []) or []:
        print(f"  trainer {row}")
    tb = report["testbed"].get("result")
    if tb:
        print(tb["table"])
        print(
            f"  testbed: all done {tb['all_done']}; GPU telemetry samples "
            f"{tb['gpu_telemetry_samples']}, max util {tb['gpu_util_max']} %, "
            f"max mem {tb['gpu_mem_max']} B, max power {tb['gpu_power_max']} W; "
            f"model error {tb['model_error_mean_abs']:.3f}"
        )
    failed = [k for k in ("nvml", "trainers", "testbed") if not report[k]["ok"]]
    trainer_rows = report["trainers"].get("result") or []
    failed += [r["run"] for r in trainer_rows if r.get("ok") is False]
    if tb and not tb["all_done"]:
        failed.append("testbed jobs")
    print(f"gpu_check: {'FAILED ' + ', '.join(failed) if failed else 'all parts passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
