"""``mlsched demo --emulate``: the demo's ResNet/VGG mix on an emulated cluster.

Four hosts in two racks (1 Gbit/s host links, 200 Mbit/s between the racks) are built as
network namespaces; an agent runs in each, the controller in this process on the cluster's
control-plane address, planning with the shaped rates as its topology. Before training, a
TCP probe measures an in-rack and a cross-rack link against the configured rates. After
each slot the demo prints, per job, the measured communication time and bandwidth next to
the runtime model's prediction, and the bandwidth the refitted model then gives each job on
an in-rack and a cross-rack path beside the shaped rate (the error shows how close the
closed loop has come). Everything the cluster made is removed at the end, on errors too.
"""

from __future__ import annotations

import logging
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlsched.controller.server import Controller, ControllerConfig
from mlsched.controller.status import JobStatus
from mlsched.engine.engine import Engine
from mlsched.testbed.emulated.cluster import EmulatedCluster
from mlsched.testbed.emulated.comm_report import (
    BandwidthFit,
    CommRow,
    bandwidth_table,
    comm_report,
    comm_table,
)
from mlsched.testbed.emulated.netns import EmulationError
from mlsched.testbed.emulated.topology import EmulationSpec

__all__ = [
    "DEMO_SPEC",
    "EmulatedDemo",
    "demo_summary",
    "emulated_controller",
    "run_emulated_demo",
    "wait_for_engine",
]

log = logging.getLogger(__name__)

#: The issue's example: 4 hosts in 2 racks, 1 Gbit/s host links, 200 Mbit/s between racks.
DEMO_SPEC = EmulationSpec(hosts=4, racks=2, host_gbps=1.0, rack_gbps=0.2)

_FINAL = ("done", "rejected", "failed", "cancelled")


@dataclass
class EmulatedDemo:
    """What the run measured: link probes, per-slot communication and bandwidth fits."""

    statuses: dict[str, JobStatus] = field(default_factory=dict)
    probes: dict[str, tuple[float, float]] = field(default_factory=dict)  # path: (meas, cfg)
    comm: list[CommRow] = field(default_factory=list)
    fits: list[BandwidthFit] = field(default_factory=list)


def emulated_controller(
    cluster: EmulatedCluster, *, policy: str, slot_seconds: float, **kw: Any
) -> Controller:
    """A controller in this process on the cluster's control-plane address, with its
    topology and credentials (it listens beyond loopback, so it needs both)."""
    token, secret = cluster.credentials()
    cfg = ControllerConfig(
        listen=f"{cluster.controller_host}:0",
        token=token,
        agent_secret=secret,
        topology=cluster.topology(),
        policy=policy,
        slot_seconds=slot_seconds,
        db=str(cluster.files / "state.db"),
        checkpoint_root=str(cluster.files / "checkpoints"),
        min_agents=kw.pop("min_agents", cluster.spec.hosts),
        heartbeat_s=kw.pop("heartbeat_s", 0.5),
        agent_timeout_s=kw.pop("agent_timeout_s", 10.0),
        task_timeout_s=kw.pop("task_timeout_s", 30.0),
        **kw,
    )
    return Controller(cfg).start()


def run_emulated_demo(
    *,
    policy: str = "fifo",
    slots: int = 16,
    slot_seconds: float = 10.0,
    workdir: Path | None = None,
    jobs: list[dict[str, Any]] | None = None,
    spec: EmulationSpec = DEMO_SPEC,
    out: Any = None,
) -> EmulatedDemo:
    """Run the demo; progress and tables go to ``out`` (default: ``sys.stdout``)."""
    import yaml

    from mlsched.testbed.local import demo_jobs

    out = sys.stdout if out is None else out
    scratch = workdir is None
    run_dir = Path(tempfile.mkdtemp(prefix="mlsched-emulate-")) if workdir is None else workdir
    result = EmulatedDemo()
    try:
        with EmulatedCluster.create(spec, run_dir / "state.json") as cluster:
            _say(out, _describe(cluster))
            result.probes = _probe_links(cluster, out)
            ctl = emulated_controller(cluster, policy=policy, slot_seconds=slot_seconds)
            try:
                cluster.start_agents(ctl.address)
                ctl.submit(yaml.safe_dump(jobs if jobs is not None else demo_jobs(policy)))
                _watch(ctl, wait_for_engine(ctl, cluster), cluster, slots, out, result)
                result.statuses = {j.job_id: j for j in ctl.jobs()}
            finally:
                ctl.stop(stop_tasks=True)
    finally:
        if scratch:
            shutil.rmtree(run_dir, ignore_errors=True)
    return result


def wait_for_engine(ctl: Controller, cluster: EmulatedCluster, timeout_s: float = 90.0) -> Engine:
    """The controller's engine once its agents have registered; EmulationError when an
    agent exits first or ``timeout_s`` passes (the message says where the logs are)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        engine = ctl.engine
        if engine is not None:
            return engine
        dead = [p for p in cluster.state.processes if not p.alive()]
        if dead:
            raise EmulationError(f"agent {dead[0].name} exited at start (log: {dead[0].log})")
        time.sleep(0.2)
    raise EmulationError(
        f"the agents did not register within {timeout_s:.0f} s (logs in {cluster.files / 'logs'})"
    )


def _say(out: Any, text: str) -> None:
    print(text, file=out, flush=True)


def _describe(cluster: EmulatedCluster) -> str:
    spec, plan = cluster.spec, cluster.plan
    racks: dict[str, list[str]] = {}
    for h in plan.hosts:
        racks.setdefault(h.rack, []).append(f"{h.name} {h.data_addr}")
    layout = "; ".join(f"{r}: {', '.join(hs)}" for r, hs in racks.items())
    return (
        f"emulated cluster {plan.cluster_id}: {spec.hosts} hosts in {spec.racks} racks, "
        f"{spec.host_gbps:g} Gbit/s host links, {spec.rack_gbps:g} Gbit/s rack uplinks "
        f"({layout}); CPUs: {cluster.cpu_isolation or 'not isolated'}; "
        f"controller {plan.controller_addr}; files in {cluster.files}"
    )


def _probe_links(cluster: EmulatedCluster, out: Any) -> dict[str, tuple[float, float]]:
    """One TCP stream over an in-rack and a cross-rack path, against the shaped rates."""
    plan, spec = cluster.plan, cluster.spec
    first = plan.hosts[0]
    probes: dict[str, tuple[float, float]] = {}
    for path, rate in (("in-rack", spec.host_gbps), ("cross-rack", spec.rack_gbps)):
        peer = next(
            (h for h in plan.hosts[1:] if (h.rack == first.rack) == (path == "in-rack")), None
        )
        if peer is None:
            continue
        gbps = cluster.measure_gbps(first.name, peer.name, seconds=1.0)
        probes[path] = (gbps, rate)
        _say(
            out,
            f"link {path} {first.name}->{peer.name}: measured {gbps:.3f} Gbit/s, shaped "
            f"{rate:g} ({100 * (gbps - rate) / rate:+.0f}%)",
        )
    return probes


def _watch(
    ctl: Controller,
    engine: Engine,
    cluster: EmulatedCluster,
    slots: int,
    out: Any,
    result: EmulatedDemo,
) -> None:
    """Every second: progress lines; at each slot with new measurements, its rows."""
    shown = -1
    while True:
        jobs = ctl.jobs()
        final = bool(jobs) and all(j.state in _FINAL for j in jobs)
        specs = {job_id: r.spec for job_id, r in dict(engine.records).items()}
        rows = ctl.store.measurements()
        newest = max((int(r["slot"]) for r in rows), default=-1)
        if newest > shown:
            comm, fits = comm_report(cluster.plan, cluster.topology(), specs, rows)
            result.comm, result.fits = comm, fits
            fresh = [r for r in comm if r.slot > shown]
            if fresh:
                line = "  ".join(
                    f"{j.job_id} {j.state} {100 * j.progress / max(1.0, j.total_work):.0f}%"
                    for j in jobs
                )
                _say(out, f"\nslot {newest}: {line}\n{comm_table(fresh)}")
                ran = {r.job_id for r in fresh}
                now = [f for f in fits if f.slot == newest and ran & set(f.jobs.split(","))]
                if now:
                    _say(out, bandwidth_table(now))
            shown = newest
        if final or engine.slot >= slots:
            return
        time.sleep(1.0)


def demo_summary(result: EmulatedDemo) -> str:
    """Per job: slots measured, mean measured vs predicted communication, and the last
    bandwidth errors per path; then the model error of the first and last slot."""
    lines = []
    by_job: dict[str, list[CommRow]] = {}
    for r in result.comm:
        by_job.setdefault(r.job_id, []).append(r)
    for job_id, rows in by_job.items():
        meas = sum(r.measured_comm_s for r in rows) / len(rows)
        pred = sum(r.predicted_comm_s for r in rows) / len(rows)
        paths = ",".join(sorted({r.path for r in rows}))
        lines.append(
            f"{job_id}: {len(rows)} slots ({paths}); comm s/it measured {meas:.4f}, "
            f"predicted {pred:.4f}; iteration error first {100 * rows[0].iter_error:+.0f}%, "
            f"last {100 * rows[-1].iter_error:+.0f}%"
        )
    last: dict[tuple[str, str], BandwidthFit] = {(f.jobs, f.path): f for f in result.fits}
    for (jobs, path), f in sorted(last.items()):
        lines.append(
            f"{path} bandwidth of {jobs}: model {f.model_gbps:.3f} Gbit/s vs shaped "
            f"{f.shaped_gbps:g} ({100 * f.error:+.0f}%)"
        )
    return "\n".join(lines)
