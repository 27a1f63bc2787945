"""Constraint (2i) of spec 002's model, checked on any placement: the PSs on a server must
cover the bandwidth of all the job's workers placed elsewhere (C-PS-9). A_online meets it
by construction (:mod:`.mincost`); the baselines meet it with ``one_ps_host``. This module
states it once, for whoever must show that a schedule keeps it."""

from __future__ import annotations

from mlsched.core.allocation import Placement
from mlsched.core.job import JobSpec

__all__ = ["uncovered_ps_hosts"]

#: Slack on the comparison of two sums of Gbit/s (float rounding, not a tolerance).
_EPS = 1e-9


def uncovered_ps_hosts(job: JobSpec, placement: Placement) -> list[int]:
    """The servers holding PSs of ``job`` whose PSs' bandwidth is less than that of the
    job's workers on other servers ((2i)); empty when the placement keeps (2i), or when
    the job has no PSs."""
    if not job.uses_ps or not placement.ps:
        return []
    b = job.worker_demand(placement.worker_type)["bw_gbps"]
    big_b = job.ps_demand(placement.ps_type)["bw_gbps"]
    workers = dict(placement.workers)
    total = sum(workers.values())
    return [h for h, s in placement.ps if s * big_b + _EPS < (total - workers.get(h, 0)) * b]
