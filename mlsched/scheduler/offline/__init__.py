"""Offline benchmarks: the offline optima of spec 001's and spec 000's problems and the
performance ratio."""

from mlsched.scheduler.offline.optimum import (
    OfflineResult,
    offline_optimum,
    performance_ratio,
    worker_rate,
)
from mlsched.scheduler.offline.pdors_optimum import pdors_optimum

__all__ = ["OfflineResult", "offline_optimum", "pdors_optimum", "performance_ratio", "worker_rate"]
