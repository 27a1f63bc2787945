"""Least-squares fitting of a model family's parameters, with pinning and residuals.

Parameters the data cannot identify (a column of zeros, or one that is a combination of
the columns kept before it, e.g. no cross-server sample yet) stay at their prior and are
reported as pinned. The rest are fitted by bounded linear least squares (non-negative:
times and bandwidth factors cannot be negative). A failed fit keeps the prior and says why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

__all__ = ["FitResult", "fit_linear"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FitResult:
    """Fitted parameters, which ones stayed at the prior, and the residuals of the fit."""

    params: np.ndarray
    pinned: tuple[str, ...]
    residuals: np.ndarray
    n_samples: int
    ok: bool = True
    message: str = ""

    @cached_property
    def rmse(self) -> float:
        return float(np.sqrt(np.mean(self.residuals**2))) if self.residuals.size else 0.0


def _lsq_linear(a: np.ndarray, rhs: np.ndarray) -> Any:
    """scipy's bounded (x >= 0) least squares, imported on first need."""
    from scipy.optimize import lsq_linear

    return lsq_linear(a, rhs, bounds=(0.0, np.inf), method="bvls")


def fit_linear(
    design: np.ndarray,
    target: np.ndarray,
    prior: np.ndarray,
    names: tuple[str, ...],
    *,
    rel_tol: float = 1e-9,
) -> FitResult:
    """Fit ``target ~ design @ params`` (rows are samples) starting from ``prior``."""
    design = np.asarray(design, dtype=float)
    target = np.asarray(target, dtype=float)
    prior = np.asarray(prior, dtype=float)
    n, k = design.shape if design.ndim == 2 else (0, len(prior))
    if n == 0:
        return FitResult(prior.copy(), names, np.zeros(0), 0, ok=False, message="no samples")
    if not (np.isfinite(design).all() and np.isfinite(target).all()):
        message = "non-finite values in the design or the target"
        log.warning(
            "[perfmodel] %s; keeping prior %s", message, dict(zip(names, prior, strict=True))
        )
        return FitResult(
            prior.copy(), tuple(names), design @ prior - target, n, ok=False, message=message
        )
    scale = np.abs(design).max(axis=0)
    free: list[int] = []
    for j in range(k):
        if scale[j] <= rel_tol:
            continue
        cols = design[:, [*free, j]] / np.where(scale[[*free, j]] > 0, scale[[*free, j]], 1)
        if np.linalg.matrix_rank(cols, tol=1e-8 * max(1, n)) == len(free) + 1:
            free.append(j)
    pinned_idx = [j for j in range(k) if j not in free]
    params = prior.copy()
    rhs = target - design[:, pinned_idx] @ prior[pinned_idx] if pinned_idx else target.copy()
    message = ""
    ok = True
    if free:
        a = design[:, free] / scale[free]
        try:
            # The free columns have full rank, so the unconstrained least-squares solution
            # is unique; when it is non-negative it is also the bounded one, and scipy (a
            # third of a second to import) is not needed.
            x = np.linalg.lstsq(a, rhs, rcond=None)[0]
            if np.isfinite(x).all() and (x >= 0).all():
                params[free] = x / scale[free]
            else:
                sol = _lsq_linear(a, rhs)
                if sol.success:
                    params[free] = sol.x / scale[free]
                else:
                    ok, message = False, f"solver did not converge: {sol.message}"
        except (ValueError, np.linalg.LinAlgError) as err:  # singular or degenerate input
            ok, message = False, f"fit failed: {err}"
        if not ok:
            log.warning(
                "[perfmodel] %s; keeping prior %s", message, dict(zip(names, prior, strict=True))
            )
            params = prior.copy()
    residuals = design @ params - target
    return FitResult(params, tuple(names[j] for j in pinned_idx), residuals, n, ok, message)
