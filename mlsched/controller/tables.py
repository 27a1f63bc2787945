"""The tables ``mlsched status`` and ``mlsched demo`` print, from the controller's plain
status types (:mod:`.status`): the command line converts the messages it receives first."""

from __future__ import annotations

from collections.abc import Sequence

from mlsched.controller.status import AgentGpu, ClusterStatus, JobStatus

__all__ = ["cluster_summary", "decision_line", "gpu_line", "job_table"]


def decision_line(job: JobStatus) -> str:
    """What became of a job at its arrival: the price it was quoted, the user's answer and
    the admission (``j1: quoted 4.2 (worker 0.35, PS 0.21 per unit): accepted, admitted
    in slot 3``)."""
    if job.quote_decision:
        head = (
            f"{job.job_id}: quoted {job.price:.4g} (worker {job.worker_price:.4g}, "
            f"PS {job.ps_price:.4g} per unit): {job.quote_decision}"
        )
    else:
        head = f"{job.job_id}: no price"
    if job.admitted:
        return f"{head}, admitted in slot {job.admitted_slot} ({job.state})"
    return f"{head}, {job.state}" + (f": {job.reason}" if job.reason else "")


def gpu_line(g: AgentGpu) -> str:
    """``gpu 0 V100 GPU-3f2a...: 80% util, 4.0 / 16.0 GiB, 250 W`` (what NVML gave)."""
    parts = []
    if g.util_percent is not None:
        parts.append(f"{g.util_percent:.0f}% util")
    if g.mem_used_bytes is not None:
        total = f" / {g.mem_total_bytes / 2**30:.1f}" if g.mem_total_bytes else ""
        parts.append(f"{g.mem_used_bytes / 2**30:.1f}{total} GiB")
    if g.power_w is not None:
        parts.append(f"{g.power_w:.0f} W")
    uuid = f" {g.uuid[:12]}..." if len(g.uuid) > 12 else (f" {g.uuid}" if g.uuid else "")
    return f"gpu {g.index} {g.model or '?'}{uuid}: {', '.join(parts) or 'no readings'}"


def cluster_summary(c: ClusterStatus) -> str:
    lines = [f"slot {c.slot} ({c.slot_seconds:g}s slots), policy {c.policy}"]
    for a in c.agents:
        cap = " ".join(f"{k}={v:g}" for k, v in sorted(a.capacity.items()))
        used = " ".join(f"{k}={v:g}" for k, v in sorted(a.used.items()) if v)
        state = "alive" if a.alive else "LOST"
        lines.append(
            f"  agent {a.agent_id:<12} {a.host:<15} {state:<5} tasks {a.tasks:<2} "
            f"capacity {cap}; in use {used or '-'}"
        )
        lines.extend(f"    {gpu_line(g)}" for g in a.gpus)
    if c.quotes:
        lines.append(
            f"prices: revenue {c.revenue:.4g} (profit: no cost model), {c.quotes_accepted} of "
            f"{c.quotes} quotes accepted ({100 * c.quotes_accepted / c.quotes:.0f}%)"
        )
    if c.model_error_samples:
        lines.append(
            f"runtime model: mean |predicted - measured| / measured = "
            f"{100 * c.model_error_mean_abs:.1f}% over {c.model_error_samples} job-slots"
        )
    return "\n".join(lines)


def job_table(jobs: Sequence[JobStatus], *, wide: bool = False) -> str:
    """One row per job (``wide``: also its arrival, admission and completion slots, utility
    and checkpoint step)."""
    if wide:
        return _wide_table(jobs)
    return _table(jobs)


def _wide_table(jobs: Sequence[JobStatus]) -> str:
    base = _table(jobs).splitlines()
    head = f"{'arrival':>7} {'admit':>6} {'complete':>8} {'utility':>9} {'ckpt':>7}  "
    out = [head + base[0], "-" * (len(head) + len(base[0]))]
    rows = iter(base[2:])
    for j, line in zip(jobs, rows, strict=False):
        admitted = str(j.admitted_slot) if j.admitted else "-"
        done = str(j.completion_slot) if j.completion_slot >= 0 else "-"
        out.append(f"{j.arrival_slot:>7} {admitted:>6} {done:>8} {j.utility:>9.4g} "
                   f"{j.checkpoint_step:>7}  {line}")  # fmt: skip
        if j.reason and j.state in _REASONED:
            out.append(" " * len(head) + next(rows, ""))
    return "\n".join(out)


_REASONED = ("rejected", "failed", "cancelled", "paused", "re-placing")


def _table(jobs: Sequence[JobStatus]) -> str:
    head = (
        f"{'job':<14} {'owner':<10} {'launch':<8} {'state':<10} {'admitted':<8} {'price':>9} {'paid':>9} "
        f"{'answer':<8} "
        f"{'progress':>13} {'slots':>5} "
        f"{'iters':>6} "
        f"{'restarts':>8} {'fails':>5} {'lost':>6} {'pred s/it':>9} {'meas s/it':>9}  placement"
    )
    rows = [head, "-" * len(head)]
    for j in jobs:
        pct = 100.0 * j.progress / j.total_work if j.total_work else 0.0
        where = " ".join(f"{p.agent_id}:{p.workers}w{p.ps}ps" for p in j.placement) or "-"
        pred = f"{j.predicted_iteration_s:.3f}" if j.measured_iteration_s else "-"
        meas = f"{j.measured_iteration_s:.3f}" if j.measured_iteration_s else "-"
        admitted = f"slot {j.admitted_slot}" if j.admitted else "no"
        price, paid = (f"{j.price:.4g}", f"{j.price_paid:.4g}") if j.quote_decision else ("-", "-")
        rows.append(
            f"{j.job_id:<14} {j.owner or '-':<10} {j.launch or '-':<8} {j.state:<10} {admitted:<8} "
            f"{price:>9} {paid:>9} {j.quote_decision or '-':<8} "
            f"{j.progress:>6.0f} {pct:>5.1f}% "
            f"{j.slots_run:>5} "
            f"{j.iterations:>6} {j.restarts:>8} {j.failed_generations:>5} {j.lost_steps:>6} "
            f"{pred:>9} {meas:>9}  {where}"
        )
        if j.reason and j.state in _REASONED:
            rows.append(f"{'':<14} {j.reason}")
    return "\n".join(rows)
