"""Stopping and resuming changes nothing: a run stopped at step 10 and resumed to step 20
ends with the same parameters and SGD momentum as a run that went to step 20 at once (same
layout, deterministic Gloo sums). Restoring the weights but not the momentum, or resuming
the data stream at the wrong batch, makes them differ."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from trainer_helpers import checkpoint, make_config

from mlsched.trainers.launch import launch


@pytest.mark.parametrize(
    "layout",
    [
        {"arch": "allreduce", "num_workers": 2},
        {"arch": "ps", "mode": "sync", "num_workers": 2, "num_ps": 2},
    ],
    ids=["ddp-2-ranks", "ps-sync-2x2"],
)
def test_a_resumed_run_ends_where_an_uninterrupted_one_does(
    tmp_path: Path, layout: dict[str, Any]
) -> None:
    for sub in ("straight", "resumed"):
        (tmp_path / sub).mkdir()
    straight = make_config(tmp_path / "straight", "straight", stop_step=20, **layout)
    assert launch(straight).ok
    stopped = make_config(tmp_path / "resumed", "first", stop_step=10, **layout)
    assert launch(stopped).ok
    resumed = replace(stopped, metrics=str(tmp_path / "second.jsonl"), stop_step=20)
    assert launch(resumed).ok

    a, b = checkpoint(straight), checkpoint(resumed)
    assert (a.step, a.data_cursor) == (b.step, b.data_cursor) == (20, 40)
    assert a.model.keys() == b.model.keys() and a.momentum.keys() == b.momentum.keys()
    for name in a.model:
        torch.testing.assert_close(b.model[name], a.model[name], rtol=1e-5, atol=1e-6, msg=name)
    for name in a.momentum:
        torch.testing.assert_close(
            b.momentum[name], a.momentum[name], rtol=1e-5, atol=1e-6, msg=name
        )
