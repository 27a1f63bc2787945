"""The fidelity experiment's numbers: per-job and per-policy errors, the goals, the ablation
and the plots (:mod:`mlsched.testbed.fidelity.experiment` runs it).

A job's error is ``|simulated - measured| / measured`` JCT; a job finished on one side only
counts as an infinite error (it fails the median if enough do). A policy's error is that of
its mean JCT over the jobs both sides finished. The ranking orders the policies by mean JCT;
two policies whose measured means are within 5 % of each other are a tie, which either order
matches (the testbed cannot tell them apart: its own runs vary by a few %).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlsched.engine.results import JobRecord, RunResult
from mlsched.engine.summary import jct_s
from mlsched.experiments.base import Check

__all__ = [
    "GOAL_JOB",
    "GOAL_POLICY",
    "TIE",
    "FidelityRun",
    "ablation_rows",
    "fidelity_checks",
    "fidelity_report",
    "finished_means",
    "iteration_medians",
    "job_row",
    "pooled_checks",
    "same_ranking",
    "signed_error",
    "write_plots",
]

#: The goals: per-job median error, each policy's mean JCT error.
GOAL_JOB = 0.10
GOAL_POLICY = 0.10
#: Measured means closer than this (relative) are a tie for the ranking.
TIE = 0.05
MAIN = "profile"


@dataclass
class FidelityRun:
    """One policy's real run and its simulations (by truth: ``profile`` first)."""

    policy: str
    measured: RunResult
    simulated: dict[str, RunResult]
    servers: tuple[str, ...] = ()  # as the real run's engine numbered them
    #: The cluster as the real run's engine numbered it (``Cluster.to_dict``): what a
    #: recorded run is simulated again on (:mod:`mlsched.testbed.fidelity.noise`).
    cluster: dict[str, Any] | None = None

    def jobs(self, truth: str = MAIN) -> list[dict[str, Any]]:
        """Per job: JCT measured and simulated (seconds, None if unfinished), the error
        (absolute and signed), the restarts and the median seconds per iteration on each
        side (the agents' measurements; the simulator's truth)."""
        sim, iters = self.simulated[truth], iteration_medians(self.measured)
        iters_sim = iteration_medians(sim)
        rows = []
        for job_id, rec in sorted(self.measured.records.items()):
            measured = {
                "job_id": job_id, "policy": self.policy,
                "jct_measured_s": jct_s(rec, self.measured.slot_seconds),
                "restarts_measured": rec.restarts, "iteration_measured_s": iters.get(job_id),
                "started_slot_measured": rec.started_slot,
                "slots_run_measured": rec.slots_run,
                "placement_measured": placement_text(rec, self.servers),
                **launch_costs(rec, "measured"),
            }  # fmt: skip
            rows.append(job_row(measured, sim, self.servers, iters_sim))
        return rows

    def means(self, truth: str = MAIN) -> tuple[float | None, float | None]:
        """Mean JCT measured and simulated over the jobs both sides finished."""
        return finished_means(self.jobs(truth))

    def to_dict(self) -> dict[str, Any]:
        m, s = self.means()
        return {
            "policy": self.policy,
            "servers": list(self.servers),
            "jobs": self.jobs(),
            "mean_jct_measured_s": m,
            "mean_jct_simulated_s": s,
            "mean_error": _error(s, m),
            "slots_measured": self.measured.slots,
            "slots_simulated": self.simulated[MAIN].slots,
            "cluster": self.cluster,
        }


def job_row(
    measured: Mapping[str, Any],
    sim: RunResult,
    servers: Sequence[str] = (),
    iters: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """A job's row: its measured side (``job_id``, ``policy``, ``jct_measured_s``,
    ``restarts_measured``, ``iteration_measured_s``, ``started_slot_measured``,
    ``placement_measured``, :func:`launch_costs`) beside what ``sim`` gives it (``servers``: its servers' names by
    index; ``iters``: :func:`iteration_medians` of ``sim``, when already at hand)."""
    iters = iteration_medians(sim) if iters is None else iters
    job_id, jm = measured["job_id"], measured["jct_measured_s"]
    other = sim.records.get(job_id)
    js = jct_s(other, sim.slot_seconds) if other is not None else None
    return {
        "job_id": job_id, "policy": measured["policy"],
        "jct_measured_s": jm, "jct_simulated_s": js,
        "error": _error(js, jm), "signed_error": signed_error(js, jm),
        "restarts_measured": measured.get("restarts_measured"),
        "restarts_simulated": other.restarts if other is not None else None,
        "iteration_measured_s": measured.get("iteration_measured_s"),
        "iteration_simulated_s": iters.get(job_id),
        "started_slot_measured": measured.get("started_slot_measured"),
        "started_slot_simulated": other.started_slot if other is not None else None,
        "slots_run_measured": measured.get("slots_run_measured"),
        "slots_run_simulated": other.slots_run if other is not None else None,
        "placement_measured": measured.get("placement_measured"),
        "placement_simulated": placement_text(other, servers) if other is not None else None,
        "startup_measured_s": measured.get("startup_measured_s"),
        "restart_measured_s": measured.get("restart_measured_s"),
        **(launch_costs(other, "simulated") if other is not None else {}),
    }  # fmt: skip


def launch_costs(record: JobRecord, side: str) -> dict[str, float | None]:
    """A job's first launch to its first iteration (``startup_<side>_s``), and the mean
    time a restart lost (``restart_<side>_s``); None where it had none."""
    return {
        f"startup_{side}_s": record.startup_s or None,
        f"restart_{side}_s": record.restart_s / record.restarts if record.restarts else None,
    }


def placement_text(record: JobRecord, names: Sequence[str]) -> str | None:
    """The job's last placement by server name (``h0+h2 ps h0``; ``names``: the servers
    by index); None if never placed. Where a job ran decides its links."""
    p = record.last_placement
    if p is None:
        return None

    def side(pairs: tuple[tuple[int, int], ...]) -> str:
        return "+".join(
            (names[s] if s < len(names) else str(s)) + (f"x{n}" if n > 1 else "") for s, n in pairs
        )

    return side(p.workers) + (f" ps {side(p.ps)}" if p.ps else "")


def iteration_medians(result: RunResult) -> dict[str, float]:
    """Per job, the median of its slots' measured seconds per iteration (a slot's first
    iterations after a start are the agents' to leave out; the median keeps one slow slot
    from moving it)."""
    by_job: dict[str, list[float]] = {}
    for e in result.model_errors:
        if e.measured_s > 0:
            by_job.setdefault(e.job_id, []).append(e.measured_s)
    return {job_id: statistics.median(v) for job_id, v in by_job.items()}


def signed_error(simulated: float | None, measured: float | None) -> float | None:
    """``(simulated - measured) / measured``; None where either is missing."""
    if simulated is None or measured is None or measured <= 0:
        return None
    return (simulated - measured) / measured


def _error(simulated: float | None, measured: float | None) -> float:
    if simulated is None or measured is None or measured <= 0:
        return math.inf
    return abs(simulated - measured) / measured


def _median_job_error(runs: Sequence[FidelityRun], truth: str) -> float:
    errors = [r["error"] for run in runs for r in run.jobs(truth)]
    return statistics.median(errors) if errors else math.inf


def finished_means(rows: Sequence[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    """Mean JCT measured and simulated over the job rows both sides finished."""
    both = [
        (r["jct_measured_s"], r["jct_simulated_s"])
        for r in rows
        if r["jct_measured_s"] is not None and r["jct_simulated_s"] is not None
    ]
    if not both:
        return None, None
    return statistics.fmean(m for m, _ in both), statistics.fmean(s for _, s in both)


def _same_ranking(
    means: Mapping[str, tuple[float | None, float | None]], tie: float = TIE
) -> tuple[bool, str]:
    """Whether the simulated means order the policies as the measured ones (ties aside)."""
    same, detail, _ = same_ranking(means, tie)
    return same, detail


def same_ranking(
    means: Mapping[str, tuple[float | None, float | None]],
    tie: float | Callable[[str, str], float] = TIE,
) -> tuple[bool, str, int]:
    """Whether the simulated means order the policies as the measured ones, where the
    measured means are more than ``tie`` apart (relative to the smaller; a function of the
    two policies where each pair has its own); the order of each side, and how many pairs
    were that far apart (the others either order matches)."""
    if any(m is None or s is None for m, s in means.values()):
        return False, "a policy finished no job on one side", 0
    order_m = sorted(means, key=lambda p: means[p][0] or 0.0)
    order_s = sorted(means, key=lambda p: means[p][1] or 0.0)
    detail = f"measured {' < '.join(order_m)}, simulated {' < '.join(order_s)}"
    same, decided = True, 0
    for i, a in enumerate(order_m):
        for b in order_m[i + 1 :]:
            ma, mb = means[a][0] or 0.0, means[b][0] or 0.0
            if (mb - ma) / ma <= (tie(a, b) if callable(tie) else tie):
                continue  # a tie on the testbed: either order
            decided += 1
            if order_s.index(a) > order_s.index(b):
                same = False
    return same, detail, decided


def _goal_checks(
    by_policy: Mapping[str, Sequence[Mapping[str, Any]]],
    job_goal: float = GOAL_JOB,
    policy_goal: float = GOAL_POLICY,
    tie: float = TIE,
) -> list[Check]:
    """The goals over job rows by policy (``jct_measured_s``, ``jct_simulated_s``,
    ``error``; an error that could not be measured, None in a file, counts as infinite)."""
    errors = [
        math.inf if r["error"] is None else float(r["error"])
        for rows in by_policy.values()
        for r in rows
    ]
    median = statistics.median(errors) if errors else math.inf
    checks = [
        Check(
            f"per-job median |simulated - measured| / measured JCT <= {job_goal:.0%}",
            median <= job_goal,
            f"{median:.1%} over {len(errors)} job runs",
        )
    ]
    means = {policy: finished_means(rows) for policy, rows in by_policy.items()}
    for policy, (m, s) in means.items():
        err = _error(s, m)
        detail = "no job finished on both sides" if m is None or s is None else (
            f"measured {m:.1f} s, simulated {s:.1f} s ({err:.1%})"
        )  # fmt: skip
        checks.append(Check(f"{policy}: mean JCT within {policy_goal:.0%}",
                            err <= policy_goal, detail))  # fmt: skip
    same, detail = _same_ranking(means, tie)
    name = "the same ranking of policies by mean JCT"
    if tie != TIE:
        name += f" (measured means within {tie:.0%} a tie)"
    checks.append(Check(name, same, detail))
    return checks


def fidelity_checks(runs: Sequence[FidelityRun]) -> list[Check]:
    """The goals, for the main truth (the profile)."""
    return _goal_checks({run.policy: run.jobs(MAIN) for run in runs})


def pooled_checks(results: Sequence[Mapping[str, Any]]) -> list[Check]:
    """The goals over several runs of the experiment together (``results.json`` contents):
    every job run of each in the per-job median, a policy's mean over all its job runs,
    the ranking by those means. What repeated runs of the smaller form assert, when one
    run's four jobs are too few to hold a mean within 10 % on a machine whose speed drifts."""
    by_policy: dict[str, list[Mapping[str, Any]]] = {}
    for res in results:
        for run in res["runs"]:
            by_policy.setdefault(run["policy"], []).extend(run["jobs"])
    return _goal_checks(by_policy)


def ablation_rows(
    runs: Sequence[FidelityRun], unisolated: FidelityRun | None
) -> list[dict[str, Any]]:
    """Per variant: the per-job median error, the worst policy-mean error, the ranking."""
    rows = []
    for truth in runs[0].simulated if runs else ():
        worst = max(_error(s, m) for m, s in (run.means(truth) for run in runs))
        same, detail = _same_ranking({run.policy: run.means(truth) for run in runs})
        rows.append(
            {"variant": "simulator: " + truth, "median_job_error": _median_job_error(runs, truth),
             "worst_policy_error": worst, "same_ranking": same, "ranking": detail}
        )  # fmt: skip
    if unisolated is not None:
        m, s = unisolated.means()
        rows.append(
            {"variant": f"testbed without CPU slices ({unisolated.policy} only)",
             "median_job_error": _median_job_error([unisolated], MAIN),
             "worst_policy_error": _error(s, m), "same_ranking": None, "ranking": "-"}
        )  # fmt: skip
    return rows


def write_plots(out: Path, runs: Sequence[dict[str, Any]]) -> list[Path]:
    """``fidelity_scatter.png`` (simulated against measured JCT per job, a marker per
    policy, the diagonal and its +-10 % band) and ``fidelity_cdf.png`` (both CDFs), from
    the runs as ``results.json`` holds them (:meth:`FidelityRun.to_dict`)."""
    from mlsched.experiments.plots import plot_cdf, plot_scatter

    points = {
        run["policy"]: [
            (r["jct_measured_s"], r["jct_simulated_s"])
            for r in run["jobs"]
            if r["jct_measured_s"] is not None and r["jct_simulated_s"] is not None
        ]
        for run in runs
    }
    scatter = plot_scatter(
        out / "fidelity_scatter.png", points, band=GOAL_JOB,
        xlabel="measured JCT (s)", ylabel="simulated JCT (s)",
        title="Each job: simulated (profile) against measured",
    )  # fmt: skip
    samples: dict[str, list[float]] = {}
    styles: dict[str, tuple[str, str]] = {}
    for i, run in enumerate(runs):
        for side, key, line in (("measured", "jct_measured_s", "-"),
                                ("simulated", "jct_simulated_s", "--")):  # fmt: skip
            name = f"{run['policy']} {side}"
            samples[name] = [r[key] for r in run["jobs"] if r[key] is not None]
            styles[name] = (f"C{i % 10}", line)
    cdf = plot_cdf(out / "fidelity_cdf.png", samples, xlabel="JCT (s)", styles=styles,
                   title="JCT on the testbed (solid) and in the simulator (dashed)")  # fmt: skip
    return [scatter, cdf]


def _pct(value: float | None) -> str:
    return "-" if value is None or math.isinf(value) else f"{value:.1%}"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def fidelity_report(results: dict[str, Any]) -> str:
    """The per-job rows, the policy means, the goals and the ablation, as text."""
    lines = [f"{'policy':<8}{'job':<16}{'measured':>10}{'simulated':>11}{'error':>8}"]
    for run in results["runs"]:
        for r in run["jobs"]:
            lines.append(
                f"{run['policy']:<8}{r['job_id']:<16}{_s(r['jct_measured_s']):>10}"
                f"{_s(r['jct_simulated_s']):>11}{_pct(r['error']):>8}"
            )
        lines.append(
            f"{run['policy']:<8}{'(mean)':<16}{_s(run['mean_jct_measured_s']):>10}"
            f"{_s(run['mean_jct_simulated_s']):>11}{_pct(run['mean_error']):>8}"
        )
    lines += ["", "ablation:", f"{'variant':<48}{'job median':>11}{'worst mean':>11}  ranking"]
    for row in results["ablation"]:
        same = {True: "same", False: "differs", None: "-"}[row["same_ranking"]]
        lines.append(
            f"{row['variant']:<48}{_pct(row['median_job_error']):>11}"
            f"{_pct(row['worst_policy_error']):>11}  {same}"
        )
    bracket = results.get("profile", {}).get("bracket") or []
    if bracket:
        lines += [
            "",
            "profile measured before and after the real runs (the simulator has the mean):",
        ]
        for row in bracket:
            (i0, i1), (s0, s1) = row["iteration_s"], row["startup_s"]
            lines.append(
                f"  {row['cell']:<24} s/it {i0:.4f} / {i1:.4f} ({_pct(row['iteration_s_spread'])})"
                + (
                    f", start-up {s0:.1f} / {s1:.1f} s ({_pct(row['startup_s_spread'])})"
                    if s0 is not None and s1 is not None
                    else ""
                )
            )
    lines.append("")
    for check in results["checks"]:
        lines.append(f"[{'PASS' if check['passed'] else 'FAIL'}] {check['name']}: "
                     f"{check['detail']}")  # fmt: skip
    return "\n".join(lines)
