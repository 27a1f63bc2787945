"""Baseline policies: FIFO, DRF, Tiresias-style LAS and an Optimus-style greedy allocator."""

from mlsched.scheduler.baselines import fifo

__all__ = ["fifo"]
