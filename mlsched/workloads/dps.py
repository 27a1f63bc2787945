"""The DPS simulation setting (spec 004 §5, §7) with the spec's recommended fills.

* **Cluster**: ``servers`` machines (S = 50), each with X⁰[s, k] ~ U{0..worker_slots} slots
  of each of K worker types and Z⁰[s, m] ~ U{0..ps_slots} of each of M PS types (K = 15,
  M = 10, 30 and 18 slots). A slot type is a resource of its own (``w3``, ``p7``), so the
  types' capacities are disjoint as in the paper; a type whose column sums to less than
  the largest count a job may ask is drawn again (``notes.redrawn_types``).
* **Types**: bandwidth h_k ~ U[0.1, 5] Gbit/s per worker type, H_m ~ U[5, 20] per PS type
  (uniform within the paper's ranges); reference unit values π ~ U[0.3, 0.6] (A24;
  ``pi_low``/``pi_high``).
* **Jobs** (A25: the paper's trace is unnamed): Poisson arrivals at N / T per slot,
  conditioned on N (sorted uniform times floored to slots); (k, m) uniform; d^W ~
  U{1..max_workers}, d^P ~ U{1..max_ps}; synchronous PS jobs with β ~ U[0.5, 1.5] s of
  compute per round, gradients w ~ U[10, 200] MB, and α rounds (A16: one push and one pull
  per round); the ``dps`` runtime family gives τ = α (β + (1 - q) 2w / b), b = min(h, H/d^W).
* **Runtimes** are not in the paper. α = u A rounds with u ~ U[0.25, 1.75], where A makes
  the **offered load at price 0** equal to ``load``: (N/T) E[d] A E[β + 2w/b] / (slot C)
  on the more loaded of the worker and PS sides, C the expected total capacity of that
  side, with every job spread (the usual case: a job is co-located only when one server
  holds it whole). The default 2 puts half the jobs' demand, the share that accepts at
  the revenue-optimal price c = 1 below, at the cluster's capacity: the regime the paper's
  capacity term and PA's shorter runtimes are about.
* **Valuations** (§7): v = ξ (π^W_k d^W + π^P_m d^P), ξ ~ U[0, 2] (``budget=uniform``; or
  ``lognormal``, mean 1 and σ = 0.75). With prices c π, a user accepts with probability
  1 - c/2 and revenue peaks at c = 1: without capacity limits the best fixed price of a
  type is its π.

Job ``i`` maps onto :class:`JobSpec` as ``epochs=α``, ``chunks=d^W``, ``batches_per_chunk=1``
(a round completes d^W units), ``min/max/requested_workers=d^W``, ``requested_ps=d^P``,
``worker={w<k>: 1, bw_gbps: h_k}``, ``ps={p<m>: 1, bw_gbps: H_m}``, ``compute_s=β``,
``gradient_mb=w``, ``valuation=v``, a synchronous PS job with a model name of its own.
"""

from __future__ import annotations

import math

import numpy as np

from mlsched.core.cluster import Cluster, Pool, Server, Topology
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.core.resources import ResourceVector
from mlsched.workloads.base import Workload, register_workload
from mlsched.workloads.oasis import _check, _is_count, _is_number

__all__ = ["BUDGETS", "dps_paper", "mean_rounds"]

BUDGETS = ("uniform", "lognormal")
_LOGNORMAL_SIGMA = 0.75
_BETA = (0.5, 1.5)  # seconds of compute per round
_SPREAD = (0.25, 1.75)  # alpha / A
_GRADIENT_MB = (10.0, 200.0)


def round_seconds(
    h: np.ndarray, big_h: np.ndarray, max_workers: int, samples: int = 20_000
) -> float:
    """E[β + 2w/b]: a round's mean seconds when a job is spread (w in Gbit, b = min(h_k,
    H_m / d^W)), over the types' bandwidths and the demand and size draws (a fixed sample)."""
    rng = np.random.default_rng(12345)
    k = rng.integers(len(h), size=samples)
    m = rng.integers(len(big_h), size=samples)
    dw = rng.integers(1, max_workers + 1, size=samples)
    gbit = rng.uniform(*_GRADIENT_MB, size=samples) * 8e-3
    b = np.minimum(h[k], big_h[m] / dw)
    return float(np.mean(rng.uniform(*_BETA, size=samples) + 2 * gbit / b))


def mean_rounds(
    *,
    rate: float,
    round_s: float,
    capacity: tuple[float, float],
    demand: tuple[float, float],
    load: float,
    slot_seconds: float,
) -> float:
    """A: the mean rounds per job that make the offered load at price 0 equal ``load``
    on the more loaded side (``capacity`` and mean ``demand`` of the worker and PS sides)."""
    return min(
        load * cap * slot_seconds / (rate * d * round_s)
        for cap, d in zip(capacity, demand, strict=True)
    )


def _cluster(
    rng: np.random.Generator,
    servers: int,
    types: tuple[int, int],
    slots: tuple[int, int],
    need: tuple[int, int],
) -> tuple[Cluster, int]:
    columns: dict[str, np.ndarray] = {}
    redrawn = 0
    for prefix, n_types, top, least in zip("wp", types, slots, need, strict=True):
        for k in range(n_types):
            col = rng.integers(0, top + 1, size=servers)
            while col.sum() < least:
                col = rng.integers(0, top + 1, size=servers)
                redrawn += 1
            columns[f"{prefix}{k}"] = col
    out = tuple(
        Server(
            f"s{s:03d}",
            ResourceVector({name: int(col[s]) for name, col in columns.items() if col[s] > 0}),
            pool=Pool.BOTH,
        )
        for s in range(servers)
    )
    return Cluster(out, Topology()), redrawn


@register_workload(
    "dps-paper",
    "spec 004 §5: typed worker/PS slots on S servers, synchronous PS jobs with private "
    "budgets, Poisson arrivals, 5-minute slots",
)
def dps_paper(
    seed: int = 0,
    jobs: int = 10_000,
    horizon: int = 10_000,
    servers: int = 50,
    worker_types: int = 15,
    ps_types: int = 10,
    worker_slots: int = 30,
    ps_slots: int = 18,
    max_workers: int = 30,
    max_ps: int = 18,
    load: float = 2.0,
    budget: str = "uniform",
    slot_seconds: float = 300.0,
    pi_low: float = 0.3,
    pi_high: float = 0.6,
    value_shift: float = 1.0,
) -> Workload:
    """Spec 004's setting; the same seed gives the same cluster, types and jobs.
    ``value_shift`` multiplies the valuations of the jobs arriving in the second half of
    the horizon (1: stationary, the spec's setting): a market that changes mid-run."""
    for name, value in (
        ("jobs", jobs),
        ("horizon", horizon),
        ("servers", servers),
        ("worker_types", worker_types),
        ("ps_types", ps_types),
        ("worker_slots", worker_slots),
        ("ps_slots", ps_slots),
        ("max_workers", max_workers),
        ("max_ps", max_ps),
    ):
        _check(name, value, _is_count(value), "an integer >= 1")
    _check("load", load, _is_number(load) and 0 < load <= 1e3, "a number in (0, 1000]")
    _check("budget", budget, budget in BUDGETS, " or ".join(BUDGETS))
    _check(
        "value_shift",
        value_shift,
        _is_number(value_shift) and 0 < value_shift <= 1e3,
        "a number in (0, 1000]",
    )
    _check("pi_low", pi_low, _is_number(pi_low) and 0 < pi_low <= 1, "a number in (0, 1]")
    _check(
        "pi_high",
        pi_high,
        _is_number(pi_high) and pi_low <= pi_high <= 1,
        f"a number in [pi_low ({pi_low}), 1]",
    )
    _check(
        "slot_seconds",
        slot_seconds,
        _is_number(slot_seconds) and 0 < slot_seconds < math.inf,
        "a number > 0",
    )
    _check(
        "max_workers",
        max_workers,
        max_workers <= servers * worker_slots,
        f"at most servers x worker_slots ({servers * worker_slots})",
    )
    _check(
        "max_ps",
        max_ps,
        max_ps <= servers * ps_slots,
        f"at most servers x ps_slots ({servers * ps_slots})",
    )
    cluster, redrawn = _cluster(
        np.random.default_rng([seed, 1]),
        servers,
        (worker_types, ps_types),
        (worker_slots, ps_slots),
        (max_workers, max_ps),
    )
    typed = np.random.default_rng([seed, 2])
    h = typed.uniform(0.1, 5.0, worker_types).round(3)
    big_h = typed.uniform(5.0, 20.0, ps_types).round(3)
    pi_w = typed.uniform(pi_low, pi_high, worker_types).round(4)
    pi_p = typed.uniform(pi_low, pi_high, ps_types).round(4)
    round_s = round_seconds(h, big_h, max_workers)
    rounds = mean_rounds(
        rate=jobs / horizon,
        round_s=round_s,
        capacity=(servers * worker_types * worker_slots / 2, servers * ps_types * ps_slots / 2),
        demand=((1 + max_workers) / 2, (1 + max_ps) / 2),
        load=load,
        slot_seconds=slot_seconds,
    )
    rng = np.random.default_rng([seed, 0])
    arrivals = np.sort(np.floor(rng.uniform(0, horizon, jobs)).astype(int))
    specs = []
    for i, arrival in enumerate(arrivals):
        k, m = int(rng.integers(worker_types)), int(rng.integers(ps_types))
        dw, dp = int(rng.integers(1, max_workers + 1)), int(rng.integers(1, max_ps + 1))
        beta = round(float(rng.uniform(*_BETA)), 4)
        grad = round(float(rng.uniform(*_GRADIENT_MB)), 3)
        alpha = max(1, round(float(rng.uniform(*_SPREAD)) * rounds))
        if budget == "uniform":
            xi = float(rng.uniform(0.0, 2.0))
        else:
            xi = float(rng.lognormal(-(_LOGNORMAL_SIGMA**2) / 2, _LOGNORMAL_SIGMA))
        value = xi * (pi_w[k] * dw + pi_p[m] * dp)
        if arrival >= horizon // 2:
            value *= value_shift
        job_id = f"j{i:05d}"
        specs.append(
            JobSpec(
                job_id=job_id,
                arrival_slot=int(arrival),
                model=f"syn-{job_id}",
                arch=Arch.PS,
                sync=SyncMode.SYNC,
                epochs=min(alpha, 1_000_000),
                chunks=dw,
                batches_per_chunk=1,
                batch_size=1,
                max_workers=dw,
                min_workers=dw,
                requested_workers=dw,
                requested_ps=dp,
                worker=ResourceVector({f"w{k}": 1, "bw_gbps": float(h[k])}),
                ps=ResourceVector({f"p{m}": 1, "bw_gbps": float(big_h[m])}),
                compute_s=beta,
                gradient_mb=grad,
                valuation=max(value, 1e-9),  # a valuation is > 0; xi = 0 has probability 0
            )
        )
    cap_w = {
        f"w{k}": int(cluster.capacity[:, cluster.resource_names.index(f"w{k}")].sum())
        for k in range(worker_types)
    }
    cap_p = {
        f"p{m}": int(cluster.capacity[:, cluster.resource_names.index(f"p{m}")].sum())
        for m in range(ps_types)
    }
    notes = {
        "spec": "004 §5, §7",
        "fills": [
            "A24 reference values pi",
            "A25 synthetic arrivals and demands",
            "runtimes by load",
        ],
        "reference_values": {
            **{f"worker:w{k}": float(pi_w[k]) for k in range(worker_types)},
            **{f"ps:p{m}": float(pi_p[m]) for m in range(ps_types)},
        },
        "worker_gbps": {f"w{k}": float(h[k]) for k in range(worker_types)},
        "ps_gbps": {f"p{m}": float(big_h[m]) for m in range(ps_types)},
        "capacity": {**cap_w, **cap_p},
        "mean_rounds": rounds,
        "mean_round_s_spread": round_s,
        "mean_spread_slots": rounds * round_s / slot_seconds,
        "load": load,
        "budget": budget,
        "redrawn_types": redrawn,
    }
    return Workload(
        name="dps-paper",
        cluster=cluster,
        jobs=tuple(specs),
        horizon_slots=horizon,
        slot_seconds=float(slot_seconds),
        runtime={"ps_sync": "dps"},
        description=f"spec 004 §5: {jobs} jobs over {horizon} slots on {servers} servers, "
        f"{worker_types} worker and {ps_types} PS types, load {load:g} at price 0 (seed {seed})",
        notes=notes,
    )
