"""Offline benchmarks: the offline optimum of spec 001's problem and the performance ratio."""

from mlsched.scheduler.offline.optimum import (
    OfflineResult,
    offline_optimum,
    performance_ratio,
    worker_rate,
)

__all__ = ["OfflineResult", "offline_optimum", "performance_ratio", "worker_rate"]
