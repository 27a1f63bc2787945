"""``mlsched experiment fidelity`` (docs/fidelity.md): the simulator against the emulated
testbed. :mod:`.experiment` runs the policies for real and simulated; :mod:`.report` turns
the two sides into per-job and per-policy errors, the goals, the ablation and the plots."""
