"""Baseline policies: FIFO, DRF, Tiresias-style LAS and spec 002's 2D-LAS, an Optimus-style greedy allocator, and
spec 001's risk-reward heuristic (RRH) and Dorm."""

from mlsched.scheduler.baselines import dorm, drf, fifo, las2d, optimus, rrh, tiresias

__all__ = ["dorm", "drf", "fifo", "las2d", "optimus", "rrh", "tiresias"]
