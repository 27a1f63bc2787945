"""Periodic checkpoints: a SIGKILLed worker (or rank) no longer costs everything since the
run started. The checkpoint that survives holds the exact state of its step (compared with
a run stopped there), the data cursor that goes with it, and a new run resumes from it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from trainer_helpers import (
    checkpoint,
    make_config,
    of_type,
    read_records,
    reap,
    start_job,
    torchrun_ranks,
    wait_all,
    wait_for_iterations,
    with_port,
)

from mlsched.core.train_config import TrainConfig
from mlsched.trainers.checkpoint import Periodic

pytestmark = pytest.mark.processes  # training processes: one such test at a time

BIG = 1_000_000
EVERY = 15  # steps between periodic checkpoints
TIMEOUT_S = 10.0


def test_the_periodic_clock_counts_steps_and_seconds() -> None:
    now = [0.0]
    p = Periodic(every_s=10.0, every_steps=5, start_step=100, clock=lambda: now[0])
    assert not p.due(100) and not p.due(104)
    assert p.due(105)
    p.done(105)
    now[0] = 9.9
    assert not p.due(106)
    now[0] = 10.0
    assert p.due(106)  # whichever comes first
    off = Periodic(every_s=0.0, every_steps=0, start_step=0, clock=lambda: now[0])
    now[0] = 1e9
    assert not off.due(10**9)


def _kill_one_and_fail(cfg: TrainConfig, victim: int) -> None:
    with reap(start_job(cfg)) as procs:
        if cfg.arch == "allreduce":
            ranks = torchrun_ranks(procs[0], cfg.num_workers)
            wait_for_iterations(cfg.metrics, 4 * EVERY * cfg.num_workers, procs=procs)
            ranks[victim].kill()
            codes = wait_all(procs, TIMEOUT_S + 20)
        else:
            wait_for_iterations(cfg.metrics, 4 * EVERY * cfg.num_workers, procs=procs)
            procs[cfg.num_ps + victim].kill()
            procs[cfg.num_ps + victim].wait(timeout=30)  # reaped: its -9 is known below
            codes = wait_all([p for p in procs if p.poll() is None or p.returncode != -9], 40)
    assert any(c != 0 for c in codes), codes


@pytest.mark.parametrize(
    ("arch", "mode", "num_ps"),
    [
        # Sync PS in make soak (CI); make test keeps all-reduce and the async PS resume below.
        pytest.param("ps", "sync", 2, marks=[pytest.mark.soak, pytest.mark.slow]),
        pytest.param("allreduce", "sync", 0, marks=pytest.mark.slow),
    ],
)
def test_after_a_kill_the_periodic_checkpoint_is_exactly_the_state_of_its_step(
    tmp_path: Path, arch: str, mode: str, num_ps: int
) -> None:
    """Over 20 s: three runs (killed, a reference stopped at the checkpoint's step, the
    resume), each waiting out its collective timeout. The exactness of the periodic state
    needs a run killed between checkpoints; no shorter test kills one."""
    cfg = with_port(
        make_config(
            tmp_path, "killed", arch=arch, mode=mode, num_workers=2, num_ps=num_ps,
            stop_step=BIG, timeout_s=TIMEOUT_S, checkpoint_every_steps=EVERY,
            checkpoint_every_s=0.0,
        )
    )  # fmt: skip
    _kill_one_and_fail(cfg, victim=1)
    records = read_records(cfg.metrics)
    saved = [r for r in of_type(records, "event") if r["event"] == "checkpoint"]
    assert len(saved) >= 2, saved  # periodic ones, from worker 0 / rank 0
    state = checkpoint(cfg)
    s = state.step
    assert (s, state.data_cursor) == (saved[-1]["step"], saved[-1]["data_cursor"])
    assert state.data_cursor == 2 * s  # two workers, one mini-batch each per step
    assert set(state.momentum) == {n for n, _ in _named(cfg)}
    assert any(float(m.abs().sum()) > 0 for m in state.momentum.values())

    # A run of the same job stopped cleanly at step s ends in the same state.
    ref = with_port(replace(cfg, checkpoint_dir=str(tmp_path / "ref"), metrics=str(tmp_path / "ref.jsonl"), stop_step=s, checkpoint_every_steps=0))  # fmt: skip
    with reap(start_job(ref)) as procs:
        assert set(wait_all(procs, 120)) == {0}
    clean = checkpoint(ref)
    assert clean.step == s
    for name, tensor in clean.model.items():
        torch.testing.assert_close(state.model[name], tensor, rtol=1e-5, atol=1e-6, msg=name)
    for name, tensor in clean.momentum.items():
        torch.testing.assert_close(state.momentum[name], tensor, rtol=1e-5, atol=1e-6, msg=name)

    # And the job resumes from it.
    again = with_port(replace(cfg, metrics=str(tmp_path / "again.jsonl"), stop_step=s + 10))
    with reap(start_job(again)) as procs:
        assert set(wait_all(procs, 120)) == {0}
    starts = [
        r["step"] for r in of_type(read_records(again.metrics), "event") if r["event"] == "start"
    ]
    assert starts and set(starts) == {s}
    assert checkpoint(again).step == s + 10


@pytest.mark.soak  # about 25 s (make soak, CI); make test keeps the all-reduce kill above
@pytest.mark.slow
def test_async_ps_resumes_from_the_periodic_checkpoint_after_a_kill(tmp_path: Path) -> None:
    cfg = with_port(
        make_config(
            tmp_path, "killed", arch="ps", mode="async", num_workers=2, num_ps=2,
            stop_step=BIG, timeout_s=TIMEOUT_S, checkpoint_every_steps=EVERY,
            checkpoint_every_s=0.0,
        )
    )  # fmt: skip
    _kill_one_and_fail(cfg, victim=1)
    state = checkpoint(cfg)
    s = state.step
    assert s >= EVERY and state.data_cursor == s  # async: one mini-batch per step
    assert state.meta.get("periodic") is True
    again = with_port(replace(cfg, metrics=str(tmp_path / "again.jsonl"), stop_step=s + 20))
    with reap(start_job(again)) as procs:
        assert set(wait_all(procs, 120)) == {0}
    records = read_records(again.metrics)
    starts = {r["step"] for r in of_type(records, "event", "ps") if r["event"] == "start"}
    assert starts == {s}
    final = checkpoint(again)
    assert (final.step, final.data_cursor) == (s + 20, s + 20)


def _named(cfg: TrainConfig) -> list[tuple[str, torch.Tensor]]:
    from mlsched.trainers.models import build_model

    model = build_model(cfg.model, num_classes=cfg.num_classes, image_size=cfg.image_size)
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]
