"""Baseline policies: FIFO, DRF, Tiresias-style LAS and an Optimus-style greedy allocator."""

from mlsched.scheduler.baselines import drf, fifo, optimus, tiresias

__all__ = ["drf", "fifo", "optimus", "tiresias"]
