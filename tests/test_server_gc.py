"""A long-running controller's start-up: the model check warmed before serving, what exists
then frozen out of the collector's scans, full collections made rarer (core/server_gc.py,
intake.warm_up)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap

from mlsched.core.server_gc import SERVING_FULL_EVERY, tune_for_serving


def test_tuning_freezes_survivors_collects_garbage_first_and_makes_full_collections_rare() -> None:
    class Node:
        pass

    kept = Node()
    a, b = Node(), Node()
    a.peer, b.peer = b, a  # type: ignore[attr-defined]
    del a, b  # cyclic garbage: collected, not frozen for good
    threshold = gc.get_threshold()
    try:
        frozen = tune_for_serving()
        assert frozen == gc.get_freeze_count() > 0
        assert gc.get_threshold() == (threshold[0], threshold[1], SERVING_FULL_EVERY)
        tracked = gc.get_objects()
        assert not any(o is kept for o in tracked)  # frozen: out of every scan
        assert sum(isinstance(o, Node) for o in gc.get_objects()) == 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
    assert any(o is kept for o in gc.get_objects())


def test_warm_up_leaves_nothing_for_the_first_submission_to_import() -> None:
    # A fresh interpreter: the first model check imports torch's shape machinery, a second
    # of held interpreter lock; after warm_up a check of another model imports nothing.
    code = textwrap.dedent(
        """
        import json, sys, time
        from mlsched.controller.intake import warm_up
        from mlsched.trainers.models import check_input
        before = set(sys.modules)
        warm_up()
        warmed = set(sys.modules)
        t = time.perf_counter()
        check_input("vgg11-narrow", 32, 10)
        check_input("mlp", 32, 100)
        print(json.dumps({"warm_up_imported": len(warmed - before),
                          "then_imported": sorted(set(sys.modules) - warmed),
                          "then_s": time.perf_counter() - t}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["warm_up_imported"] > 0  # it did the work a first submission would
    assert got["then_imported"] == []
