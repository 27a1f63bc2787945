"""The capacity ledger's room checks (mlsched.scheduler.view.CapacityLedger) against the
array formulas they stand for: ``fits`` is every resource of the demand within the free
capacity plus 1e-9, ``max_count`` the floor of the least free / demand ratio over the
demanded resources plus 1e-9 (unbounded when nothing is demanded), ``max_counts`` and
``fits_each`` those for several servers at once. The ledgers are random with free
capacity drawn near multiples of the demand (a hair under and over), where a check that is
off by its tolerance, or reads the wrong resource, answers differently. Which bug fails
it: a tolerance dropped or widened, a resource the demand does not need counted (a
division by zero), the least ratio over several resources replaced by one of them, or rows
read after they changed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlsched.core.cluster import Cluster
from mlsched.scheduler.view import CapacityLedger

RESOURCES = ("gpu", "cpu", "mem_gb")


def _ledger(rng: np.random.Generator, demand: np.ndarray, n: int = 12) -> CapacityLedger:
    cluster = Cluster.from_dict(
        {"servers": [{"name": "s", "count": n, "capacity": {"gpu": 8, "cpu": 64, "mem_gb": 512}}]}
    )
    ledger = CapacityLedger(cluster)
    # Free capacity k * demand, nudged a hair either way (or anything, where nothing is
    # demanded), so that the checks' tolerance decides.
    k = rng.integers(0, 5, size=(n, len(RESOURCES)))
    hair = rng.choice([-1e-8, -1e-10, 0.0, 1e-10, 1e-8], size=(n, len(RESOURCES)))
    ledger.free[:] = np.maximum(0.0, np.where(demand > 0, k * demand, k) + hair)
    return ledger


def _demand(rng: np.random.Generator) -> np.ndarray:
    demand = rng.choice([0.0, 0.25, 0.5, 1.0, 2.0, 3.0], size=len(RESOURCES))
    if rng.random() < 0.1:
        demand[:] = 0.0
    return demand


def _count(free: np.ndarray, demand: np.ndarray) -> int:
    need = demand > 0
    if not need.any():
        return 1 << 30
    return math.floor(float(np.min(free[need] / demand[need])) + 1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_room_checks_match_their_array_formulas(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(50):
        demand = _demand(rng)
        ledger = _ledger(rng, demand)
        n = len(ledger.free)
        for s in range(n):
            for count in (1, 2, 3):
                need = demand if count == 1 else demand * count
                assert ledger.fits(s, demand, count) == bool((need <= ledger.free[s] + 1e-9).all())
            assert ledger.max_count(s, demand) == _count(ledger.free[s], demand)
        assert ledger.fits_each(demand) == [ledger.fits(s, demand) for s in range(n)]
        servers = rng.permutation(n)[: rng.integers(1, n + 1)]
        expected = [_count(ledger.free[s], demand) for s in servers]
        assert list(ledger.max_counts(servers, demand)) == expected
        # Read from the rows as they are at the first read: taking room after it does not
        # change what follows.
        counts = ledger.max_counts(servers, demand)
        first = next(counts)
        ledger.take(int(servers[-1]), demand, 1)
        assert [first, *counts] == expected
