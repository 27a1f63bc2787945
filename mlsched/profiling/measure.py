"""Measure one cell of a profile on this machine, with the trainers agents launch.

A cell is a model, a kind (PS async, PS sync, torchrun ring, Horovod) and a worker count.
It costs two real runs of the job and a few checkpoints in this process:

1. a fresh run of ``steps`` steps: compute and communication seconds per iteration (the
   means over every worker's iterations after ``warmup``), bytes per iteration, and the
   start-up (launch to the first iteration's start, the slowest worker's);
2. a resumed run of ``resume_steps`` more from the checkpoint the first left: its start-up
   (launch to the first iteration, loading the checkpoint included) plus the checkpoint's
   save time is the cost of a restart (stop at a checkpoint, start again, resume);
3. the checkpoint of the same model and optimizer state saved and loaded ``repeats`` times
   here (the trainers' own ``save`` and ``load_latest``, on the same disk).

With ``cpus`` set, all of it runs inside a CPU share of that many cores (the cgroup cpu
controller, as an emulated host's, :mod:`mlsched.trainers.cpu_share`): the cell then says
what the job costs on a host of that share. With ``device_cores`` set instead, each process
runs in a share of its own, as an agent with stand-in devices runs it (``device_cores`` per
training rank, ``ps_cores`` for a parameter server; the checkpoint timing in one device's):
the cell then says what the job costs wherever its devices are.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from mlsched.core.errors import SpecError
from mlsched.core.train_config import Backend, Launcher, TrainConfig
from mlsched.perfmodel.profile import KINDS, Cell, kind_arch
from mlsched.trainers.cpu_share import DeviceSlices

if TYPE_CHECKING:
    from mlsched.trainers.cpu_share import SliceGroups

__all__ = [
    "SLICED_STEPS",
    "Settings",
    "device_info",
    "machine_info",
    "measure_cell",
    "train_config",
]

#: Steps of a fresh run measured in CPU slices of a fraction of a core. A short window mixes
#: few of the slices' quota periods with the scheduler's noise: 40 steps (30 measured) put an
#: async-PS MLP in 0.25/0.2-core slices at 0.0109-0.0188 s/it from one run to the next, 300
#: at 0.0167-0.0190, where the testbed's own jobs ran at 0.0164-0.0171 (and a profile 40 %
#: fast makes every simulated job finish early).
SLICED_STEPS = 300


@dataclass(frozen=True)
class Settings:
    """What every cell of one profile runs with (a resumed profile must match them)."""

    steps: int = 20
    warmup: int = 3
    resume_steps: int = 5
    batch_size: int = 32
    image_size: int = 32
    num_samples: int = 2048
    threads: int = 1
    repeats: int = 3
    device: str = "cpu"  # cpu | cuda
    #: Models measured at another image size than ``image_size`` (e.g. a VGG's five
    #: poolings need 32 px), as (model, pixels) pairs.
    image_sizes: tuple[tuple[str, int], ...] = ()
    #: Cores the cell's processes share (None: the machine's); a cgroup cpu quota.
    cpus: float | None = None
    #: Stand-in devices: cores per training rank, and per parameter server (default: the
    #: same); each process in a share of its own (:class:`DeviceSlices`).
    device_cores: float | None = None
    ps_cores: float | None = None
    #: All-reduce ranks per launcher (None: one launcher for all, as on one machine; 1: one
    #: per rank, as agents of one-device hosts run a job spread over them).
    ranks_per_node: int | None = None

    def __post_init__(self) -> None:
        for name, low in (("steps", 2), ("warmup", 0), ("resume_steps", 1), ("batch_size", 1),
                          ("image_size", 8), ("num_samples", 1), ("threads", 1),
                          ("repeats", 1)):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise SpecError(name, value, f"an integer >= {low}")
        if self.warmup >= self.steps:
            raise SpecError("warmup", self.warmup, f"fewer than steps ({self.steps})")
        if self.device not in ("cpu", "cuda"):
            raise SpecError("device", self.device, "cpu or cuda")
        if self.cpus is not None and not (
            isinstance(self.cpus, int | float) and not isinstance(self.cpus, bool)
            and 0.1 <= self.cpus <= 4096
        ):  # fmt: skip
            raise SpecError("cpus", self.cpus, "cores in 0.1..4096 (the kernel's floor is 0.1)")
        if self.device_cores is not None and self.cpus is not None:
            raise SpecError("cpus", self.cpus, "unset when device_cores is set (one or the other)")
        self.slices()  # a bad share is refused there, its field named
        rpn = self.ranks_per_node
        if rpn is not None and (not isinstance(rpn, int) or isinstance(rpn, bool) or rpn < 1):
            raise SpecError("ranks_per_node", rpn, "an integer >= 1 (or unset)")
        for model, size in self.image_sizes:
            if not isinstance(size, int) or isinstance(size, bool) or size < 8:
                raise SpecError(f"image_sizes.{model}", size, "an integer >= 8")

    def slices(self) -> DeviceSlices | None:
        return DeviceSlices.of(self.device_cores, self.ps_cores)

    def image_for(self, model: str) -> int:
        return dict(self.image_sizes).get(model, self.image_size)

    def to_dict(self) -> dict[str, Any]:
        out = {
            k: getattr(self, k)
            for k in self.__dataclass_fields__
            if k not in ("image_sizes", "cpus", "device_cores", "ps_cores", "ranks_per_node")
        }
        if self.image_sizes:  # only when used: files of earlier runs resume unchanged
            out["image_sizes"] = dict(self.image_sizes)
        if self.cpus is not None:
            out["cpus"] = self.cpus
        slices = self.slices()
        if slices is not None:
            out.update(slices.to_dict())
        if self.ranks_per_node is not None:
            out["ranks_per_node"] = self.ranks_per_node
        return out


def machine_info() -> dict[str, Any]:
    """What a profile's numbers depend on, beside its device."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": platform.node(),
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "torch": torch.__version__.split("+")[0],
    }


def device_info(device: str) -> dict[str, Any]:
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SpecError("device", device, "cpu: no CUDA device is usable here")
        return {
            "type": "cuda",
            "name": torch.cuda.get_device_name(0),
            "count": torch.cuda.device_count(),
        }
    return {"type": "cpu", "name": platform.processor() or platform.machine(), "count": 0}


def train_config(model: str, kind: str, workers: int, s: Settings, work: Path) -> TrainConfig:
    """The job a cell measures: ``workers`` workers of ``kind``, one PS for PS kinds."""
    if kind not in KINDS:
        raise SpecError("kind", kind, f"one of {', '.join(KINDS)}")
    arch = kind_arch(kind)
    return TrainConfig(
        model=model,
        arch=arch[0],
        mode=arch[1],
        num_workers=workers,
        num_ps=1 if arch[0] == "ps" else 0,
        backend=Backend.HOROVOD if kind == "horovod" else Backend.DDP,
        launcher=Launcher.TORCHRUN,
        rendezvous="127.0.0.1:0",
        stop_step=s.steps,
        checkpoint_dir=str(work / "ckpt"),
        metrics=str(work / "metrics.jsonl"),
        batch_size=s.batch_size,
        num_samples=s.num_samples,
        image_size=s.image_for(model),
        device=s.device,
        threads=s.threads,
        checkpoint_every_s=0.0,
        job_id=f"profile-{model}-{kind}-{workers}",
    )


def measure_cell(
    model: str, kind: str, workers: int, device_type: str, s: Settings, work: Path
) -> Cell:
    """Run the cell's job twice and checkpoint it; the measured cell. RuntimeError when a
    run fails (with its exit codes and errors)."""
    from mlsched.trainers.cpu_share import SliceGroups, cpu_control, inside

    slices = s.slices()
    if s.cpus is None and slices is None:
        return _measure(model, kind, workers, device_type, s, work, None)
    control, why = cpu_control()
    if control is None:
        field, value = ("cpus", s.cpus) if slices is None else ("device_cores", s.device_cores)
        raise SpecError(field, value, f"a machine whose cpu controller is writable ({why})")
    if slices is None:
        assert s.cpus is not None
        with inside(control, f"profile-{os.getpid()}", s.cpus):
            return _measure(model, kind, workers, device_type, s, work, None)
    groups = SliceGroups(control, control.root / "mlsched" / f"profile-{os.getpid()}", slices)
    try:
        return _measure(model, kind, workers, device_type, s, work, groups)
    finally:
        groups.close()


def _measure(
    model: str, kind: str, workers: int, device_type: str, s: Settings, work: Path,
    groups: SliceGroups | None,
) -> Cell:  # fmt: skip
    from mlsched.trainers.cpu_share import inside
    from mlsched.trainers.launch import launch

    cfg = train_config(model, kind, workers, s, work)
    fresh_at = time.time()
    first = launch(cfg, slices=groups, ranks_per_node=s.ranks_per_node)
    if not first.ok:
        raise RuntimeError(f"{cfg.job_id}: exit codes {first.returncodes}: {first.summary}")
    iters = _iterations(Path(cfg.metrics))
    steady = [r for r in iters if int(r["step"]) >= s.warmup]
    if not steady:
        raise RuntimeError(f"{cfg.job_id}: no iterations after the warm-up ({len(iters)} in all)")
    compute = statistics.fmean(float(r["compute_time"]) for r in steady)
    comm = statistics.fmean(float(r["comm_time"]) for r in steady)
    moved = statistics.fmean(float(r["bytes_sent"]) + float(r["bytes_recv"]) for r in steady)
    resumed_cfg = replace(
        cfg, stop_step=s.steps + s.resume_steps, metrics=str(work / "resumed.jsonl")
    )
    resumed_at = time.time()
    second = launch(resumed_cfg, slices=groups, ranks_per_node=s.ranks_per_node)
    if not second.ok:
        raise RuntimeError(f"{cfg.job_id} (resumed): exit codes {second.returncodes}")
    if groups is None:
        save_s, load_s = _checkpoint_seconds(cfg, s.repeats, work / "ckpt-timing")
    else:  # a rank saves and loads on its device's share
        name = f"{groups.parent.name}/checkpoint"
        with inside(groups.control, name, groups.slices.device_cores):
            save_s, load_s = _checkpoint_seconds(cfg, s.repeats, work / "ckpt-timing")
    return Cell(
        model=model,
        kind=kind,
        workers=workers,
        device_type=device_type,
        iteration_s=compute + comm,
        compute_s=compute,
        comm_s=comm,
        bytes_per_iteration=moved,
        startup_s=_startup(iters, fresh_at),
        checkpoint_save_s=save_s,
        checkpoint_load_s=load_s,
        restart_s=save_s + _startup(_iterations(Path(resumed_cfg.metrics)), resumed_at),
        iterations=len(steady),
        batch_size=cfg.batch_size,
        image_size=cfg.image_size,
    ).check()


def _iterations(path: Path) -> list[dict[str, Any]]:
    """The workers' ``iter`` lines of a metrics file."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("type") == "iter" and rec.get("role") in ("worker", "rank"):
            out.append(rec)
    return out


def _startup(iters: list[dict[str, Any]], launched_at: float) -> float:
    """Launch to the first iteration's start, for the slowest worker (a synchronous job
    waits for it; an asynchronous one is at full speed only with every worker)."""
    firsts: dict[tuple[str, int], float] = {}
    for r in iters:
        key = (str(r.get("role")), int(r.get("rank", 0)))
        began = float(r["t"]) - float(r["compute_time"]) - float(r["comm_time"])
        firsts[key] = min(firsts.get(key, began), began)
    if not firsts:
        raise RuntimeError("a run left no iterations")
    return max(0.0, max(firsts.values()) - launched_at)


def _checkpoint_seconds(cfg: TrainConfig, repeats: int, root: Path) -> tuple[float, float]:
    """Median seconds to save and to load the job's checkpoint (model and momentum)."""
    from mlsched.trainers.checkpoint import load_latest, save
    from mlsched.trainers.common import build_trainee, momentum_by_name, sgd, snapshot

    trainee = build_trainee(cfg)
    model = trainee.model
    opt = sgd(cfg, model.parameters())
    x, y = trainee.batch(0, cfg.batch_size)
    trainee.loss_fn(model(x), y).backward()
    opt.step()  # momentum buffers exist from the first step on
    saves, loads = [], []
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        for step in range(1, repeats + 1):
            t0 = time.perf_counter()
            state = snapshot(cfg, model, momentum_by_name(model, opt), step, step, {})
            save(tmp, state, keep=2)
            t1 = time.perf_counter()
            if load_latest(tmp) is None:
                raise RuntimeError("a checkpoint just saved does not load")
            t2 = time.perf_counter()
            saves.append(t1 - t0)
            loads.append(t2 - t1)
    return statistics.median(saves), statistics.median(loads)
