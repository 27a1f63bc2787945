"""One trainer configuration from spec to process: rendering, the wire, the command line.

No processes here: what the controller renders for a layout, what crosses the wire and
comes back, and the command each launch kind runs (the processes themselves run in
tests/test_trainers_ddp.py, tests/test_trainers_ps.py, tests/test_trainers_horovod.py and,
launched by agents, tests/test_testbed_faults.py)."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlsched.controller.runs import TaskSettings, plan_from_dict, plan_to_dict, render_tasks
from mlsched.core.errors import SpecError
from mlsched.core.job import TRAINING_KEYS, JobSpec
from mlsched.core.tasks import LaunchKind, NodeLaunch
from mlsched.core.train_config import JOB_SETTINGS, Role, TrainConfig, check_settings
from mlsched.net.task_wire import config_from_proto, config_to_proto, task_from_proto, task_to_proto
from mlsched.trainers.__main__ import build_parser, config_from_args
from mlsched.trainers.launch import node_command
from mlsched.v1 import train_pb2

LAYOUT = (("a0", 2, 0), ("a1", 0, 0), ("a2", 1, 0))  # a1 holds nothing of this job


def job(**training: Any) -> JobSpec:
    return JobSpec.from_dict(
        {"job_id": "j", "model": "mlp", "arch": "allreduce", "batches_per_chunk": 90,
         "max_workers": 3, "training": training}
    )  # fmt: skip


def render(spec: JobSpec, layout: Any = LAYOUT, **kw: Any) -> Any:
    return render_tasks(
        spec,
        layout,
        number=4,
        step=10,
        cursor=30,
        rendezvous="10.0.0.1:30100",
        settings=TaskSettings(checkpoint_root="/ckpt", **kw),
        gpu_indices={("a0", 0): [0], ("a0", 1): [3], ("a2", 0): [1]},
    )


def test_a_torchrun_job_is_one_task_per_node_with_the_ranks_in_layout_order() -> None:
    tasks, agent_of, stop, ups = render(job())
    assert list(tasks) == ["j.g4.n0", "j.g4.n1"] and ups == 3
    assert [agent_of[t] for t in tasks] == ["a0", "a2"]
    n0, n1 = tasks.values()
    assert (n0.node, n1.node) == (
        NodeLaunch(LaunchKind.TORCHRUN, 0, (2, 1)),
        NodeLaunch(LaunchKind.TORCHRUN, 1, (2, 1)),
    )
    assert (n0.config.rank, n1.config.rank) == (0, 2)  # each node's first global rank
    assert {t.config.num_workers for t in tasks.values()} == {3}
    assert (n0.gpu_indices, n1.gpu_indices) == ((0, 3), (1,))
    assert stop == 10 + (90 - 30) // 3 and n0.config.stop_step == stop
    assert n0.launch == "torchrun" and n0.computes


def test_horovod_and_direct_launches() -> None:
    tasks, *_ = render(job(backend="horovod"))
    assert [t.node.launcher for t in tasks.values()] == [LaunchKind.HOROVOD] * 2
    assert next(iter(tasks.values())).launch == "horovod"
    tasks, *_ = render(job(launcher="direct"))
    assert list(tasks) == ["j.g4.r0", "j.g4.r1", "j.g4.r2"]
    assert [t.config.rank for t in tasks.values()] == [0, 1, 2]
    assert {t.node for t in tasks.values()} == {NodeLaunch()}
    ps = JobSpec.from_dict({**job().to_dict(), "arch": "ps", "training": {}})
    tasks, *_ = render(ps, (("a0", 1, 1), ("a2", 1, 0)))
    assert list(tasks) == ["j.g4.ps0", "j.g4.w0", "j.g4.w1"]
    assert [t.launch for t in tasks.values()] == ["ps"] * 3
    assert [t.computes for t in tasks.values()] == [False, True, True]


def test_settings_come_from_the_trainer_config_then_the_controller_then_the_job() -> None:
    (plain, _), *_ = (list(render(job())[0].values()),)
    defaults = TrainConfig(model="mlp", checkpoint_dir="-")
    assert (plain.config.num_samples, plain.config.timeout_s) == (
        defaults.num_samples,
        defaults.timeout_s,
    )
    ctl = next(iter(render(job(), timeout_s=12.0, checkpoint_every_s=5.0)[0].values())).config
    assert (ctl.timeout_s, ctl.checkpoint_every_s) == (12.0, 5.0)
    own = next(iter(render(job(timeout_s=7.0), timeout_s=12.0)[0].values())).config
    assert own.timeout_s == 7.0  # the job's own setting wins


def test_training_keys_and_trainer_flags_derive_from_the_config() -> None:
    assert TRAINING_KEYS == JOB_SETTINGS
    assert {"backend", "launcher", "lr", "num_samples"} <= set(JOB_SETTINGS)
    assert not {"rank", "role", "stop_step", "rendezvous", "job_id"} & set(JOB_SETTINGS)
    flags = {a.dest for a in build_parser()._actions}
    assert {f.name for f in fields(TrainConfig)} <= flags
    with pytest.raises(SpecError) as info:
        check_settings({"launcher": "mpirun"})
    assert info.value.field == "training.launcher"
    with pytest.raises(SpecError) as info:
        check_settings({"rank": 3})
    assert info.value.field == "training.rank"
    assert check_settings({"backend": "horovod", "lr": 0.1}) == {"backend": "horovod", "lr": 0.1}


def test_the_proto_has_exactly_the_configs_fields() -> None:
    proto = set(train_pb2.TrainConfig.DESCRIPTOR.fields_by_name)
    assert proto == {f.name for f in fields(TrainConfig)}


#: The fields every architecture draws alike.
_COMMON = dict(
    model=st.sampled_from(["mlp", "resnet20"]),
    stop_step=st.integers(0, 10**9),
    checkpoint_dir=st.text("abc/_-", min_size=1, max_size=20).map(lambda t: "/" + t),
    lr=st.floats(1e-6, 10.0),
    momentum=st.floats(0.0, 0.99),
    data_path=st.one_of(st.none(), st.text("abc/", min_size=1, max_size=10)),
    num_samples=st.integers(1, 10**8),
    seed=st.integers(0, 2**31 - 1),
    timeout_s=st.floats(0.5, 1000.0),
    checkpoint_every_s=st.floats(0.0, 1000.0),
    overlap=st.booleans(),
    device=st.sampled_from(["cpu", "cuda", "auto"]),
)

allreduce_configs = st.builds(
    TrainConfig,
    arch=st.just("allreduce"),
    num_workers=st.integers(1, 64),
    num_ps=st.just(0),
    backend=st.sampled_from(["ddp", "horovod"]),
    launcher=st.sampled_from(["torchrun", "direct"]),
    **_COMMON,
)


@st.composite
def ps_configs(draw: st.DrawFn) -> TrainConfig:
    """A PS job's worker or PS, async or sync, at any rank its role has."""
    workers, ps = draw(st.integers(1, 64)), draw(st.integers(1, 16))
    role = draw(st.sampled_from([Role.WORKER, Role.PS]))
    rank = draw(st.integers(0, (workers if role is Role.WORKER else ps) - 1))
    return TrainConfig(
        arch="ps",
        mode=draw(st.sampled_from(["async", "sync"])),
        role=role,
        rank=rank,
        num_workers=workers,
        num_ps=ps,
        **{name: draw(strategy) for name, strategy in _COMMON.items()},
    )


configs = st.one_of(allreduce_configs, ps_configs())


@settings(max_examples=200, deadline=None)
@given(cfg=configs)
def test_a_config_survives_the_wire_the_store_and_the_command_line(cfg: TrainConfig) -> None:
    assert config_from_proto(config_to_proto(cfg)) == cfg
    parsed = config_from_args(build_parser().parse_args(cfg.to_args()))
    assert parsed == cfg
    sizes = (cfg.num_workers,)
    from mlsched.core.tasks import TaskPlan

    if cfg.arch == "ps":  # one process a task
        plan = TaskPlan("t.g1.n0", cfg, NodeLaunch(LaunchKind.DIRECT), 1)
    else:
        kind = LaunchKind.HOROVOD if cfg.backend.value == "horovod" else LaunchKind.TORCHRUN
        plan = TaskPlan("t.g1.n0", replace(cfg, launcher="torchrun"), NodeLaunch(kind, 0, sizes), 1)
    assert task_from_proto(task_to_proto(plan)) == plan
    assert plan_from_dict(plan_to_dict(plan)) == plan


def test_node_commands() -> None:
    cfg = TrainConfig(
        model="mlp", arch="allreduce", num_workers=3, num_ps=0, rendezvous="10.0.0.1:30100",
        checkpoint_dir="/c", timeout_s=90.0,
    )  # fmt: skip
    cmd = node_command(cfg, NodeLaunch(LaunchKind.TORCHRUN, 1, (2, 1)), log_dir="/t/l")
    i = cmd.index("torch.distributed.run")
    flags = dict(zip(cmd[i + 1 : cmd.index("-m", i)][::2], cmd[i + 2 :: 2], strict=False))
    assert flags["--nnodes"] == "2" and flags["--node-rank"] == "1"
    assert flags["--nproc-per-node"] == "1" and flags["--max-restarts"] == "0"
    assert (flags["--master-addr"], flags["--master-port"]) == ("10.0.0.1", "30100")
    assert flags["--rdzv-conf"] == "timeout=90" and flags["--log-dir"] == "/t/l"
    assert cmd[cmd.index("-m", i) + 1] == "mlsched.trainers"
    hvd = node_command(replace(cfg, backend="horovod"), NodeLaunch(LaunchKind.HOROVOD, 0, (2, 1)))
    assert hvd[hvd.index("-m") + 1] == "mlsched.trainers.allreduce.horovod_node"
    assert hvd[hvd.index("--node-sizes") + 1] == "2,1" and "--" in hvd
    assert "--backend=horovod" in hvd
    direct = node_command(replace(cfg, launcher="direct", rank=2), NodeLaunch())
    assert direct[1:3] == ["-m", "mlsched.trainers"] and "--rank=2" in direct
