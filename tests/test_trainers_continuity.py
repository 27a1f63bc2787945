"""A stop, a resume and a re-layout change nothing the job had learnt.

A real job (DDP, Horovod when installed, synchronous PS) trains 10 steps on ``a`` ranks,
checkpoints at its stop, and resumes on ``b`` ranks to step 20 (2 -> 1 and 1 -> 2). Its final
checkpoint must equal an uninterrupted run of the same schedule, computed here in one process
with plain PyTorch: step ``s`` on ``W`` ranks averages the gradients of mini-batches
``cursor .. cursor + W - 1`` and takes one SGD step (momentum, weight decay); the cursor then
moves by ``W``. The model has dropout, so the random draws count too: they are keyed to the
batch a step trains, so they continue across the stop and the re-layout.

Plausible bugs this catches: momentum not restored on resume (the parameters drift from the
reference), the data stream resumed at the wrong batch or advanced per step instead of per
rank, the random draws restarted from the seed or keyed to the step or rank (different
dropout masks), a gradient summed instead of averaged across ranks, and a checkpoint's cursor
that does not count the ranks of the layout that wrote it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from trainer_helpers import checkpoint, make_config

from mlsched.core.train_config import Backend, TrainConfig
from mlsched.trainers.allreduce.horovod import horovod_available
from mlsched.trainers.checkpoint import TrainState
from mlsched.trainers.common import build_trainee, momentum_by_name, sgd
from mlsched.trainers.launch import launch

pytestmark = pytest.mark.processes  # training processes: one such test at a time

STOP, END = 10, 20

ARCHS: dict[str, dict[str, Any]] = {
    "ddp": {"arch": "allreduce", "backend": Backend.DDP},
    "horovod": {"arch": "allreduce", "backend": Backend.HOROVOD},
    "ps-sync": {"arch": "ps", "mode": "sync", "num_ps": 1},
}


def reference(
    cfg: TrainConfig, schedule: list[int], reseed: Callable[[int], object] | None = None
) -> tuple[TrainState, int]:
    """Weights, momentum and cursor of an uninterrupted run where step ``s`` has
    ``schedule[s]`` ranks: one process, plain PyTorch. ``reseed(step)``, if given, replaces
    the draws of each step (to show that they matter)."""
    trainee = build_trainee(cfg)
    model = trainee.model
    params = [p for _, p in trainee.named_params()]
    opt = sgd(cfg, params)
    cursor = 0
    for step, world in enumerate(schedule):
        model.train()
        grads = [torch.zeros_like(p) for p in params]
        for r in range(world):
            x, y = trainee.batch(cursor + r, cfg.batch_size)
            if reseed is not None:
                reseed(step)
            model.zero_grad(set_to_none=True)
            trainee.loss_fn(model(x), y).backward()
            for g, p in zip(grads, params, strict=True):
                assert p.grad is not None
                g += p.grad
        for g, p in zip(grads, params, strict=True):
            p.grad = g / world
        opt.step()
        cursor += world
    state = TrainState(
        step=len(schedule),
        data_cursor=cursor,
        model={k: v.detach().clone() for k, v in model.state_dict().items()},
        momentum=momentum_by_name(model, opt),
    )
    return state, cursor


def _config(root: Path, name: str, arch: str, ranks: int, stop_step: int) -> TrainConfig:
    return make_config(
        root, name, model="mlp-dropout", num_workers=ranks, stop_step=stop_step, **ARCHS[arch]
    )


def _layouts() -> list[Any]:
    """Every backend shrinking 2 -> 1 and growing 1 -> 2. Growing runs in make soak (CI);
    make test keeps shrinking, the same resume logic (and the one the mutation check's
    resume mutants are caught by), except Horovod's, whose resume code is DDP's with another
    all-reduce (make test keeps its Horovod-to-DDP resume, test_trainers_horovod.py)."""
    out = []
    for before, after in ((2, 1), (1, 2)):
        for arch in sorted(ARCHS):
            soak = (before, after) == (1, 2) or arch == "horovod"
            out.append(
                pytest.param(
                    arch,
                    before,
                    after,
                    id=f"{before}to{after}-{arch}",
                    marks=[pytest.mark.soak] if soak else [],
                )
            )
    return out


@pytest.mark.parametrize(("arch", "before", "after"), _layouts())
def test_a_resumed_relaid_out_run_equals_an_uninterrupted_one(
    tmp_path: Path, arch: str, before: int, after: int
) -> None:
    if ARCHS[arch].get("backend") is Backend.HOROVOD and not horovod_available():
        pytest.skip("Horovod not installed: run make horovod")
    first = _config(tmp_path, "first", arch, before, STOP)
    outcome = launch(first)
    assert outcome.ok, (outcome.returncodes, outcome.summary)
    assert checkpoint(first).data_cursor == STOP * before
    second = replace(
        _config(tmp_path, "second", arch, after, END), checkpoint_dir=first.checkpoint_dir
    )
    outcome = launch(second)
    assert outcome.ok, (outcome.returncodes, outcome.summary)

    got = checkpoint(second)
    want, cursor = reference(second, [before] * STOP + [after] * (END - STOP))
    assert (got.step, got.data_cursor) == (END, cursor) == (END, STOP * (before + after))
    assert got.rng == {"seed": second.seed, "keyed_by": "batch_index"}
    assert got.model.keys() == want.model.keys()
    assert got.momentum.keys() == want.momentum.keys() and got.momentum
    # Tolerance: the ranks' gradients are summed in another order than here (float32).
    for name in want.model:
        torch.testing.assert_close(got.model[name], want.model[name], rtol=1e-4, atol=1e-5)
    for name in want.momentum:
        torch.testing.assert_close(got.momentum[name], want.momentum[name], rtol=1e-4, atol=1e-5)


def test_the_reference_tells_layouts_and_dropout_masks_apart(tmp_path: Path) -> None:
    """The comparison above has teeth: a schedule that differs only in where the re-layout
    happens, or dropout masks keyed to the step instead of the batch, give weights far
    outside its tolerance."""
    cfg = _config(tmp_path, "ref", "ddp", 2, END)
    base, _ = reference(cfg, [2] * STOP + [1] * STOP)
    moved, _ = reference(cfg, [2] * (STOP + 1) + [1] * (STOP - 1))
    by_step, _ = reference(cfg, [2] * STOP + [1] * STOP, reseed=torch.manual_seed)
    for other in (moved, by_step):
        gap = max(float((base.model[k] - other.model[k]).abs().max()) for k in base.model)
        assert gap > 1e-3
