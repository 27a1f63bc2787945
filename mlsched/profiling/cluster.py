"""A profile measured through the agents of a running cluster, on their devices and links.

Each cell is a probe (:mod:`mlsched.controller.probes`): the controller runs the cell's job
on idle agents in one shape (``host``, ``rack``, ``racks``), stops it at a checkpoint and
resumes it, and returns what the agents measured. The file is the same versioned profile
as a one-machine run's; its cells carry their ``placement`` and its ``machine`` names the
controller and its agents. Like a local run, it is written after every cell and resumes:
cells already in the file are not measured again, and a file of another cluster or other
settings is refused, the differing field named.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import grpc

from mlsched.core.errors import SpecError
from mlsched.perfmodel.profile import (
    PLACEMENTS,
    Cell,
    Profile,
    can_spread,
    kind_arch,
    load_profile,
)
from mlsched.profiling.grid import CellList, Grid, ProfileRun
from mlsched.profiling.measure import Settings
from mlsched.v1 import jobs_pb2, jobs_pb2_grpc

__all__ = ["cell_job", "measure_on_cluster", "run_cluster_grid"]


def cell_job(model: str, kind: str, workers: int, s: Settings) -> dict[str, Any]:
    """The job a cell measures, as a client submits one (the controller names it)."""
    arch, sync = kind_arch(kind)
    training: dict[str, Any] = {
        "num_samples": s.num_samples,
        "image_size": s.image_for(model),
        "threads": s.threads,
    }
    if kind == "horovod":
        training["backend"] = "horovod"
    job: dict[str, Any] = {
        "job_id": "probe",
        "model": model,
        "arch": arch,
        "sync": sync,
        "batch_size": s.batch_size,
        "max_workers": workers,
        "requested_workers": workers,
        "worker": {"gpu": 1},
        "training": training,
    }
    if arch == "ps":
        job["requested_ps"] = 1
    return job


def measure_on_cluster(
    stub: jobs_pb2_grpc.JobServiceStub,
    job: Mapping[str, Any],
    placement: str,
    *,
    steps: int,
    warmup: int,
    timeout_s: float = 600.0,
    seconds: float = 10.0,
    poll_s: float = 1.0,
    say: Callable[[str], None] = lambda _: None,
    rpc_timeout_s: float = 30.0,
) -> Cell:
    """One probe of ``job`` in ``placement``: the measured cell. SpecError (the field
    named) when the controller refuses the request; RuntimeError when the probe fails."""
    try:
        status = stub.StartProbe(
            jobs_pb2.StartProbeRequest(
                job=json.dumps(dict(job)),
                placement=placement,
                steps=steps,
                warmup=warmup,
                timeout_s=timeout_s,
                seconds=seconds,
            ),
            timeout=rpc_timeout_s,
        )
    except grpc.RpcError as err:
        if err.code() is grpc.StatusCode.INVALID_ARGUMENT:
            why = err.details() or "a request the controller takes"
            raise SpecError("probe", placement, why) from None
        raise RuntimeError(f"{err.code().name}: {err.details()}") from None
    phase = ""
    # Each of its phases may take timeout_s; a status that stops coming ends the wait.
    deadline = time.monotonic() + 5 * timeout_s
    while status.state == "running":
        if status.phase != phase:
            phase = status.phase
            say(phase)
        if time.monotonic() > deadline:
            raise RuntimeError(f"probe {status.probe_id} still running after {5 * timeout_s:g} s")
        time.sleep(poll_s)
        status = stub.GetProbe(
            jobs_pb2.GetProbeRequest(probe_id=status.probe_id), timeout=rpc_timeout_s
        )
    if status.state != "done":
        raise RuntimeError(status.error or f"probe {status.probe_id} ended {status.state}")
    raw = json.loads(status.cell_json)
    return Cell(**raw).check("probe.cell")


def run_cluster_grid(
    address: str,
    channel: grpc.Channel,
    grid: Grid | CellList,
    settings: Settings,
    out: Path,
    *,
    placements: Iterable[str] = PLACEMENTS,
    say: Callable[[str], None] = print,
    timeout_s: float = 600.0,
    seconds: float = 10.0,
) -> ProfileRun:
    """Probe every (cell, placement) of ``grid`` not yet in ``out``, writing ``out`` after
    each. A shape the cluster cannot give a cell (too few hosts or racks, a single
    process spread) is skipped with the controller's reason."""
    shapes = tuple(placements)
    for i, p in enumerate(shapes):
        if p not in PLACEMENTS:
            raise SpecError(f"placements[{i}]", p, f"one of {', '.join(PLACEMENTS)}")
    stub = jobs_pb2_grpc.JobServiceStub(channel)
    agents = [
        a for a in stub.GetClusterStatus(jobs_pb2.GetClusterStatusRequest()).agents if a.alive
    ]
    if not agents:
        raise SpecError("controller", address, "a controller with live agents")
    types = sorted({a.gpu_type or "cpu" for a in agents})
    machine = {"controller": address, "agents": ",".join(sorted(a.agent_id for a in agents))}
    device = {
        "type": types[0] if len(types) == 1 else "mixed",
        "name": "agents",
        "count": len(agents),
    }
    recorded = {**settings.to_dict(), "through": "agents", "seconds": seconds}
    if out.exists():
        profile = load_profile(out)
        profile.check_matches(machine, device, recorded)
    else:
        profile = Profile(machine, device, recorded, created_unix=time.time())
    wanted = [(c, p) for c in grid.cells() for p in shapes if _fits(c, p)]
    done = {(c.model, c.kind, c.workers, c.placement) for c in profile.cells}
    todo = [(c, p) for c, p in wanted if (*c, p) not in done]
    run = ProfileRun(profile, [], len(wanted) - len(todo), [], [])
    say(
        f"profile {out}: {len(wanted)} cells through {len(agents)} agents of {address}, "
        f"{run.kept} already measured, {len(todo)} to go"
    )
    started = time.monotonic()
    for i, ((model, kind, workers), placement) in enumerate(todo, 1):
        head = f"[{i}/{len(todo)}] {model} {kind} x{workers} {placement}"
        job = cell_job(model, kind, workers, settings)
        try:
            cell = measure_on_cluster(
                stub,
                job,
                placement,
                steps=settings.steps - settings.warmup,
                warmup=settings.warmup,
                timeout_s=timeout_s,
                seconds=seconds,
                say=_prefixed(say, head),
            )
        except SpecError as err:
            run.skipped.append(((model, kind, workers), f"{placement}: {err.expected}"[:300]))
            say(f"{head}: skipped, {err.expected[:200]}")
            continue
        except (RuntimeError, grpc.RpcError) as err:
            run.failed.append(((model, kind, workers), f"{placement}: {err}"[:300]))
            say(f"{head}: FAILED {str(err)[:200]}")
            continue
        run.profile = run.profile.with_cell(cell)
        run.profile.save(out)
        run.measured.append((model, kind, workers))
        left = (time.monotonic() - started) / i * (len(todo) - i)
        say(
            f"{head}: {cell.iteration_s:.4f} s/it (compute {cell.compute_s:.4f}, comm "
            f"{cell.comm_s:.4f}), start-up {cell.startup_s:.2f} s, restart "
            f"{cell.restart_s:.2f} s; ~{left:.0f} s left"
        )
    if not out.exists():
        run.profile.save(out)
    return run


def _prefixed(say: Callable[[str], None], head: str) -> Callable[[str], None]:
    return lambda phase: say(f"{head}: {phase}")


def _fits(cell: tuple[str, str, int], placement: str) -> bool:
    """Whether the shape can hold the cell at all: spreading needs two processes."""
    _, kind, workers = cell
    return placement == "host" or can_spread(kind, workers)
