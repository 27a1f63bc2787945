"""Other simulators' policies as those simulators run them, for side-by-side comparisons
on their own traces (``gavel-fifo``). They are not baselines of a paper: the demo and the
experiments do not run them unless asked by name."""
