"""``simulate --replay``: what a state file must hold to be replayed, refused by name.

(That a real run replays to the same admissions and allocations, and that a tampered one
does not, is asserted beside the run in tests/test_testbed_cluster.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mlsched.cli import main
from mlsched.controller.replay_state import replay_state
from mlsched.controller.store import Store
from mlsched.core.errors import SpecError

SETUP = {
    "policy": "fifo",
    "policy_options": {},
    "seed": 0,
    "slot_seconds": 5.0,
    "profile": None,
    "cluster": {"servers": [{"name": "agent0", "capacity": {"gpu": 2, "cpu": 2}}]},
}


def _state(path: Path, **meta: object) -> Path:
    store = Store(path)
    for key, value in meta.items():
        store.set_meta(key, value)
    store.close()
    return path


def test_a_state_file_that_cannot_be_replayed_is_refused_saying_why(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="an existing controller state file"):
        replay_state(tmp_path / "missing.db")
    with pytest.raises(SpecError, match="recorded its setup"):
        replay_state(_state(tmp_path / "old.db"))
    changed = _state(tmp_path / "changed.db", engine=SETUP, cluster_changes=1)
    with pytest.raises(SpecError, match="agents joined or left"):
        replay_state(changed)
    resumed = _state(tmp_path / "resumed.db", engine=SETUP, resumed=True)
    with pytest.raises(SpecError, match="controller was restarted"):
        replay_state(resumed)


def test_an_empty_run_replays_to_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _state(tmp_path / "empty.db", engine=SETUP, slot=3)
    outcome = replay_state(db)
    assert outcome.slots == 3 and outcome.first_difference is None
    assert main(["simulate", "--replay", str(db)]) == 0
    assert "the same, slot by slot" in capsys.readouterr().out


def test_replay_takes_nothing_else(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _state(tmp_path / "empty.db", engine=SETUP, slot=1)
    assert main(["simulate", "--replay", str(db), "--policy", "drf"]) != 0
    assert "--policy" in capsys.readouterr().err
    assert main(["simulate", "--policy", "fifo"]) != 0
    assert "--workload" in capsys.readouterr().err
