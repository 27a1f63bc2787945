"""One slot's LP-RS-MDE over gains that span hundreds of orders of magnitude.

Under spec 003's sigmoid utilities a job far below its rise gains e^-300 from a slot and
one at its rise gains about 1: one LP over both sees the small gains as zero (a solver's
tolerances are about 1e-9 of the largest coefficient), so the jobs far from their rise
never start, though objective (10) counts every positive gain. Solved in tiers instead:
the jobs whose best gain lies within :data:`TIER_SPAN` of the largest, their gains divided
by that largest (computed from the logarithms, so nothing underflows), then the next tier
on the capacity the first left, and so on while a job fits. A tier's gain is worth less
than a millionth of a unit of the tier above, so this is the lexicographic optimum, the
one LP's optimum to within the LP's own tolerance; each tier's LP is well-conditioned.
A tier takes at most ``max_jobs`` jobs (spec 003 §3.6; the largest gains first): the rest
fall to the next tier, on the capacity left.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mlsched.core.allocation import Placement
from mlsched.scheduler.gadget.embeddings import fits_alone
from mlsched.scheduler.gadget.lp_rs_mde import SlotSolution
from mlsched.scheduler.gadget.problem import RingJob, SlotProblem

__all__ = ["TIER_SPAN", "solve_in_tiers"]

#: The widest ratio of gains one LP is given (its smallest over its largest).
TIER_SPAN = 1e-6
_LOG_SPAN = -math.log(TIER_SPAN)


def solve_in_tiers(
    problem: SlotProblem,
    solve: Callable[[SlotProblem], SlotSolution],
    *,
    max_jobs: int,
) -> SlotSolution:
    """``solve`` (LP-RS-MDE) on each tier of ``problem``'s jobs, largest gains first, each
    on the capacity the tiers before it left; the tiers' rings together, valued at the
    jobs' own gains."""
    waiting = sorted(
        (j for j in problem.jobs if j.best_log_gain > -math.inf),
        key=lambda j: (-j.best_log_gain, j.job_id),
    )
    residual = problem
    placements: dict[str, Placement] = {}
    sizes: dict[str, int] = {}
    lp_value = reduced_value = 0.0
    trials = columns = rounds = 0
    accepted = True
    first: SlotSolution | None = None
    at = 0
    while at < len(waiting):
        # The next tier: the waiting jobs within the span of the first, those that still
        # fit (capacity only shrinks: a job that does not fit now never will this slot).
        top = waiting[at].best_log_gain
        tier: list[RingJob] = []
        while (
            at < len(waiting)
            and waiting[at].best_log_gain >= top - _LOG_SPAN
            and len(tier) < max_jobs
        ):
            if _fits_somewhere(residual, waiting[at]):
                tier.append(waiting[at])
            at += 1
        if not tier:
            continue
        top = tier[0].best_log_gain
        scaled = SlotProblem(
            problem.cluster,
            tuple(j.rescaled(top) for j in tier),
            residual.capacity,
            residual.link_capacity,
        )
        solution = solve(scaled)
        first = first or solution
        placements.update(solution.placements)
        sizes.update(solution.sizes)
        scale = math.exp(top)
        lp_value += scale * solution.lp_value
        reduced_value += scale * solution.reduced_lp_value
        trials += solution.trials
        columns += solution.columns
        rounds += solution.lp_rounds
        accepted = accepted and solution.accepted
        residual = residual.minus(*scaled.loads(solution.placements))
    return SlotSolution(
        placements,
        problem.value(placements),
        lp_value,
        reduced_value,
        sizes,
        trials,
        accepted,
        columns,
        rounds,
        first.beta if first is not None else 1.0,
        first.gamma if first is not None else 1.0,
    )


def _fits_somewhere(problem: SlotProblem, job: RingJob) -> bool:
    """Whether the job's fewest workers (``min_ring``) still fit on its hosts."""
    return int(fits_alone(problem, job, job.min_ring).sum()) >= job.min_ring
