"""Baseline policies: FIFO, DRF, Tiresias-style LAS, spec 002's 2D-LAS and AntMan-style
classes, an Optimus-style greedy allocator, and spec 001's risk-reward heuristic (RRH) and
Dorm. Each lives in its own module, imported when its policy is first named
(:data:`mlsched.scheduler.registry.BUILTIN`)."""
