"""Offline benchmarks: the offline optima of spec 001's and spec 000's problems, the
performance ratio, spec 003's per-slot optimum and spec 004's best fixed prices."""

from mlsched.scheduler.offline.fixed_price import (
    FixedPrices,
    best_fixed_prices,
    build_model,
    replay,
)
from mlsched.scheduler.offline.gadget_optimum import SlotOptimum, slot_optimum, slot_relaxation
from mlsched.scheduler.offline.optimum import (
    OfflineResult,
    offline_optimum,
    performance_ratio,
    worker_rate,
)
from mlsched.scheduler.offline.pdors_optimum import pdors_optimum

__all__ = [
    "FixedPrices",
    "OfflineResult",
    "SlotOptimum",
    "best_fixed_prices",
    "build_model",
    "offline_optimum",
    "pdors_optimum",
    "performance_ratio",
    "replay",
    "slot_optimum",
    "slot_relaxation",
    "worker_rate",
]
