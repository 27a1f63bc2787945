"""The transport-free slot loop and what it runs on.

:mod:`.engine` (admission, per-slot allocation, progress accounting, re-planning, model
refinement) drives an :class:`.executor.Executor`: the real cluster's in
:mod:`mlsched.controller`, or :mod:`.simulator`'s, whose truth is a measured profile.
:mod:`.builder` is the one place a simulated run is built; :mod:`.summary` turns a run's
result into the figures every comparison reports.
"""
