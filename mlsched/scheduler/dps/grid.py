"""DPS's price levels and constants (spec 004 §3.1): δ, the geometric grid, θ, η.

All prices are normalised to [0, 1] (the user sees them times the policy's ``price_scale``).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "DELTA_RANGE",
    "price_grid",
    "radius_constant",
    "theorem_delta",
    "theorem_theta",
]

#: Where a grid step may lie: below, the grid has thousands of arms no run can learn; at 1
#: or above it has one price (spec: δ ∈ (0, 1)).
DELTA_RANGE = (1e-3, 0.5)


def _log_n(expected: int) -> float:
    # ln n with n >= 2, so a type expecting one job still has a radius and a step.
    return math.log(max(2, expected))


def theorem_delta(horizon: int, capacity: int, expected: int) -> float:
    """Theorem 2's step ``(T C)^(-1/3) (ln n)^(2/3)``, before clipping to :data:`DELTA_RANGE`."""
    return float((max(1, horizon) * max(1, capacity)) ** (-1.0 / 3.0) * _log_n(expected) ** (2 / 3))


def theorem_theta(horizon: int, capacity: int, expected: int) -> float:
    """Alg. 1's exploration fraction ``(T C ln n)^(2/3) / n``. It exceeds 1 at the paper's
    own scale (A5), so it is reported, never used: DPS explores ``explore_fraction``."""
    n = max(2, expected)
    return float((max(1, horizon) * max(1, capacity) * math.log(n)) ** (2 / 3) / n)


def price_grid(delta: float, *, with_one: bool = False) -> np.ndarray:
    """``{δ(1+δ)^z : z = 0..floor(log_{1+δ}(1/δ))}`` ascending, every price in [δ, 1] (A6);
    ``with_one`` adds 1.0 when the grid stops short of it."""
    if not 0 < delta < 1:
        raise ValueError(f"a grid step must lie in (0, 1), got {delta!r}")
    top = math.floor(math.log(1.0 / delta) / math.log1p(delta) + 1e-9)
    grid = delta * (1.0 + delta) ** np.arange(top + 1)
    grid = np.minimum(grid, 1.0)  # the last level may round a hair above 1
    if with_one and grid[-1] < 1.0 - 1e-12:
        grid = np.append(grid, 1.0)
    return grid


def radius_constant(expected: int, scale: float) -> float:
    """η = c_η ln n (A11)."""
    return scale * _log_n(expected)
