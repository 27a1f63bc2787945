"""Baseline policies: FIFO, DRF, Tiresias-style LAS, spec 002's 2D-LAS and AntMan-style
classes, an Optimus-style greedy allocator, and spec 001's risk-reward heuristic (RRH) and
Dorm."""

from mlsched.scheduler.baselines import antman, dorm, drf, fifo, las2d, optimus, rrh, tiresias

__all__ = ["antman", "dorm", "drf", "fifo", "las2d", "optimus", "rrh", "tiresias"]
