"""Price constants U^r, L and mu of spec 000 §3.1 ((E19)-(E22)), kept as logarithms.

    Q^r_h(rho) = L (U^r / L)^(rho / C^r_h)                                          (E19)
    U^r = max_i u_i(d_min_i - 1) / (alpha^r_i + beta^r_i)   (jobs using r, A1, A2)  (E20)
    L   = min_i [u_i(T - a_i) / (2 mu)] / [ceil(V_i c^(e)_i) sum_r (alpha + beta)]  (E21)
    mu  = max_i T sum_h sum_r C^r_h / (ceil(V_i c^(e)_i) sum_r (alpha + beta))      (E22)

L is common to all resources (the paper's choice: larger U/L, prices that react harder).
A time-critical sigmoid makes u(T - a) as small as e^-100, so everything stays in log space
(A3); ``l_floor_ratio`` > 0 raises L to at least that fraction of the smallest U^r, and
``utility_floor`` > 0 bounds u(T - a) below in L (OASiS's shipped fix of the same effect,
spec 001 A7; jobs are still scored by their true utility). The
constants need the whole job population (A4): the policy adds the catalogue at setup (the
generated job set in simulation, as the paper implicitly does) and each arrival, and they
only widen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ConstantsEstimator", "PdorsConstants"]


@dataclass(frozen=True)
class PdorsConstants:
    """ln U^r per resource and ln L (see the module docstring)."""

    ln_high: np.ndarray
    ln_low: float

    def log_prices(self, used: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        """ln p = ln L + (rho / C)(ln U^r - ln L) for ``used`` of shape (..., servers,
        resources); a resource a server lacks is priced at L (no task needing it fits)."""
        load = np.divide(used, capacity, out=np.zeros(np.shape(used)), where=capacity > 0)
        return self.ln_low + np.clip(load, 0.0, 1.0) * (self.ln_high - self.ln_low)

    @property
    def spread(self) -> float:
        """max_r ln(U^r / L): the competitive ratio's log term (report it, A3)."""
        return float(np.max(self.ln_high - self.ln_low))


class ConstantsEstimator:
    """Running extremes over the jobs seen: U^r, and the pieces of L and mu."""

    def __init__(
        self,
        n_resources: int,
        *,
        slots: int,
        total_capacity: float,
        l_floor_ratio: float = 0.0,
        utility_floor: float = 0.0,
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots!r}")
        if not (total_capacity > 0 and math.isfinite(total_capacity)):
            raise ValueError(f"total capacity must be > 0, got {total_capacity!r}")
        if not (0 <= l_floor_ratio < 1):
            raise ValueError(f"l_floor_ratio must be in [0, 1), got {l_floor_ratio!r}")
        if not (0 <= utility_floor < math.inf):
            raise ValueError(f"utility_floor must be a finite number >= 0, got {utility_floor!r}")
        self.utility_floor = utility_floor
        self.ln_high = np.full(n_resources, -math.inf)
        self._ln_slots_cap = math.log(slots) + math.log(total_capacity)
        self._min_ln_size = math.inf  # min_i ln(ceil(V c^e) sum_r demand)
        self._min_ln_density = math.inf  # min_i ln u(T - a) - ln(size_i)
        self.l_floor_ratio = l_floor_ratio

    def add(self, demand: np.ndarray, worker_slots: int, u_best: float, u_end: float) -> None:
        """One job: per-task demand alpha + beta, ceil(V c^(e)) worker-slots, utility of
        its fastest completion u(d_min - 1) and of completing at the horizon u(T - a)."""
        total = float(demand.sum())
        if total <= 0 or worker_slots < 1 or not u_best > 0:
            return
        used = demand > 0
        cand = math.log(u_best) - np.log(demand[used])
        self.ln_high[used] = np.maximum(self.ln_high[used], cand)
        ln_size = math.log(worker_slots) + math.log(total)
        self._min_ln_size = min(self._min_ln_size, ln_size)
        u_end = max(u_end, self.utility_floor)
        if u_end > 0:
            self._min_ln_density = min(self._min_ln_density, math.log(u_end) - ln_size)

    def constants(self) -> PdorsConstants | None:
        """The constants in force (None until a job with a positive utility is seen)."""
        finite = self.ln_high[np.isfinite(self.ln_high)]
        if not finite.size:
            return None
        ln_high = np.where(np.isfinite(self.ln_high), self.ln_high, finite.max())  # A2
        ln_mu = self._ln_slots_cap - self._min_ln_size
        ln_low = self._min_ln_density - math.log(2.0) - ln_mu
        if not math.isfinite(ln_low):  # no job can earn anything at the horizon
            ln_low = float(finite.min()) - 100.0
        if self.l_floor_ratio > 0:
            ln_low = max(ln_low, math.log(self.l_floor_ratio) + float(finite.min()))
        ln_low = min(ln_low, float(finite.min()))  # L <= U^r, so prices rise with load
        return PdorsConstants(ln_high=ln_high, ln_low=ln_low)
