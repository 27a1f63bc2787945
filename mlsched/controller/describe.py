"""``mlsched describe JOB``: one job's whole story from the controller's state file.

What was submitted and by whom, each slot's decision, the allocations and progress the slot
loop recorded, the measurements its processes reported, its current generation and its
failures (the executor's persisted run), and its audit rows. Each history is cut to its
newest ``limit`` rows (the reply stays bounded; the counts say how many there are).
"""

from __future__ import annotations

import json
from typing import Any

from mlsched.controller.store import Store
from mlsched.controller.tenancy import Tenancy

__all__ = ["MAX_ROWS", "describe_job", "render_description"]

MAX_ROWS = 1_000
_HISTORIES = ("decisions", "allocations", "progress", "measurements")


def describe_job(store: Store, tenancy: Tenancy, job_id: str, limit: int = 50) -> dict[str, Any]:
    """The job's detail (KeyError: no such job in the state file)."""
    rows = store.query("SELECT spec, submitted_at FROM jobs WHERE job_id = ?", (job_id,))
    if not rows:
        raise KeyError(job_id)
    limit = max(1, min(int(limit), MAX_ROWS))
    try:
        spec = json.loads(rows[0]["spec"])
    except ValueError:
        spec = None  # a damaged row: the rest still describes the job
    out: dict[str, Any] = {
        "job_id": job_id,
        "owner": tenancy.owner(job_id) or "",
        "submitted_at": rows[0]["submitted_at"],
        "spec": spec,
    }
    for name in _HISTORIES:
        history = getattr(store, name)(job_id=job_id)
        out[f"{name}_total"] = len(history)
        out[name] = [{k: v for k, v in r.items() if k not in ("job_id", "recorded_at")}
                     for r in history[-limit:]]  # fmt: skip
    out["run"] = store.run(job_id)
    out["audit"] = [
        {"at": e.at, "user": e.user, "action": e.action, "outcome": e.outcome,
         "detail": e.detail}
        for e in tenancy.audit(job_id=job_id, limit=limit)
    ]  # fmt: skip
    return out


def _placement(p: Any) -> str:
    """``{"layout": [[agent, workers, PSs], ...]}`` as ``a0:2w1ps a1:2w0ps``."""
    layout = p.get("layout") if isinstance(p, dict) else None
    if not isinstance(layout, list):
        return str(p)
    return " ".join(f"{a}:{w}w{n}ps" for a, w, n in layout) or "-"


def render_description(status: Any, detail: dict[str, Any]) -> str:
    """The text ``mlsched describe`` prints (``status``: the job's JobStatus message)."""
    spec = detail.get("spec") or {}
    lines = [
        f"Job:        {detail['job_id']}",
        f"Owner:      {detail.get('owner') or '-'}",
        f"State:      {status.state}" + (f" ({status.reason})" if status.reason else ""),
        f"Model:      {spec.get('model', '-')} ({spec.get('arch', '-')}, "
        f"{spec.get('sync', 'sync')}), launch {status.launch or '-'}",
        f"Progress:   {status.progress:.0f} of {status.total_work:.0f} units, "
        f"{status.iterations} steps, {status.slots_run} slots run",
        f"Restarts:   {status.restarts}; failed generations {status.failed_generations}, "
        f"lost steps {status.lost_steps}, checkpoint at step {status.checkpoint_step}",
    ]
    run = detail.get("run") or {}
    if run:
        gen = run.get("gen") or {}
        lines.append(
            f"Generation: {run.get('generations', 0)} launched"
            + (f", current from step {gen.get('start_step', '?')}" if gen else ", none running")
            + (f"; last failure: {run['last_failure']}" if run.get("last_failure") else "")
        )
    lines.append("")
    lines.append(f"Decisions ({detail['decisions_total']}):")
    for d in detail["decisions"]:
        verdict = "admitted" if d["admitted"] else "not admitted"
        quote = f", quote {d['quote']['total']:.4g}" if d.get("quote") else ""
        lines.append(f"  slot {d['slot']:>6}  {verdict}{quote}  {d['reason']}")
    lines.append(f"Allocations ({detail['allocations_total']}, newest last):")
    for a in detail["allocations"]:
        lines.append(f"  slot {a['slot']:>6}  {_placement(a['placement'])}")
    lines.append(f"Progress ({detail['progress_total']}):")
    for p in detail["progress"]:
        end = "  finished" if p["finished"] else ""
        lost = f"  restart {p['restart_s']:.1f} s" if p["restart_s"] else ""
        lines.append(f"  slot {p['slot']:>6}  {p['units']:.1f} units{lost}{end}")
    lines.append(f"Measurements ({detail['measurements_total']}):")
    for m in detail["measurements"]:
        it, pred = m.get("iteration_s"), m.get("predicted_s")
        shown = f"{it:.4f} s/it" if isinstance(it, (int, float)) else "-"
        model = f" (model {pred:.4f})" if isinstance(pred, (int, float)) else ""
        lines.append(f"  slot {m['slot']:>6}  {shown}{model}  {m.get('iterations', 0):g} "
                     f"iterations on {_placement(m)}")  # fmt: skip
    lines.append("Audit:")
    for e in detail["audit"]:
        lines.append(f"  {e['user']} {e['action']} {e['outcome']} {e['detail']}".rstrip())
    return "\n".join(lines)
