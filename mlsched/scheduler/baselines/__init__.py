"""Baseline policies: FIFO, DRF, Tiresias-style LAS, an Optimus-style greedy allocator, and
spec 001's risk-reward heuristic (RRH) and Dorm."""

from mlsched.scheduler.baselines import dorm, drf, fifo, optimus, rrh, tiresias

__all__ = ["dorm", "drf", "fifo", "optimus", "rrh", "tiresias"]
