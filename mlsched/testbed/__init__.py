"""The testbed: the real controller, agents and trainers run together (docs/emulation.md,
docs/fidelity.md). The controller and the agents do not know it; it starts and wires them.

* :mod:`.local`: the local testbed on one machine (``mlsched demo``): a controller in this
  process and two agents on loopback, training the demo's ResNet/VGG mix for real;
* :mod:`.emulated`: the emulated multi-host testbed (``mlsched cluster``, ``demo
  --emulate``): agents in network namespaces joined by ``tc``-shaped links, each task in a
  CPU slice of its own, link probes;
* :mod:`.experiment` (``mlsched experiment testbed``) and :mod:`.fidelity` (``mlsched
  experiment fidelity``): experiments run on a testbed for real, beside the simulator, with
  their reports;
* :mod:`.cli`: the parsers and bodies of those commands.

Nothing is imported here, so that ``mlsched --help`` (which builds :mod:`.cli`'s parser)
loads none of it.
"""
