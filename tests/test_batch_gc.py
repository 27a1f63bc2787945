"""batch_gc: rare collections inside a batch block, the caller's settings back after it."""

from __future__ import annotations

import gc

import pytest

from mlsched.core.batch_gc import BATCH_THRESHOLD, batch_gc


def test_settings_come_back_after_the_block_and_after_an_error() -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    with batch_gc():
        assert gc.get_threshold()[0] == BATCH_THRESHOLD
        assert gc.get_freeze_count() > frozen  # what existed before is out of the scans
        with batch_gc():  # nested: the outer block's settings hold
            assert gc.get_threshold()[0] == BATCH_THRESHOLD
        assert gc.get_threshold()[0] == BATCH_THRESHOLD
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen
    with pytest.raises(RuntimeError), batch_gc():
        raise RuntimeError("a failed run")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen


def test_cycles_made_inside_the_block_are_still_collected() -> None:
    class Node:
        pass

    with batch_gc():
        for _ in range(2 * BATCH_THRESHOLD):  # four times the threshold in cyclic garbage
            a, b = Node(), Node()
            a.peer, b.peer = b, a  # type: ignore[attr-defined]
        del a, b
        alive = sum(isinstance(o, Node) for o in gc.get_objects())
    assert alive < 2 * BATCH_THRESHOLD  # collected on the way (with gc off: 4x)
