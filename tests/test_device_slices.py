"""Stand-in devices as CPU slices: each task of an agent (and each process of a profile's
cell) in a CPU share of its own.

Plausible bugs this catches: a task launched outside its group (it then takes any core), a
share computed per task rather than per rank (a 2-rank torchrun gets one device's cores),
a parameter server given a device's share, groups left behind after a task exits or an
agent stops, a host's group that cannot be removed because of its tasks' groups, the
agent's own group misread from /proc, and flags accepted that the kernel would refuse.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import psutil
import pytest

from mlsched.agent.cli import add_agent_args, agent_from_args
from mlsched.core.errors import SpecError
from mlsched.core.train_config import Backend, Launcher, TrainConfig
from mlsched.profiling.measure import Settings
from mlsched.testbed.emulated.topology import EmulationSpec
from mlsched.trainers.cpu_share import (
    PERIOD_US,
    CpuControl,
    DeviceSlices,
    SliceGroups,
    cpu_control,
    group_pids,
    make_group,
    own_group,
    remove_group,
)
from mlsched.trainers.launch import command_shares, commands

_CONTROL, _WHY = cpu_control()
needs_cgroups = pytest.mark.skipif(_CONTROL is None, reason=_WHY or "ok")


def test_a_task_gets_a_device_per_rank_and_a_parameter_server_its_own_share() -> None:
    slices = DeviceSlices(0.25, 0.2)
    assert slices.cores(ps=False, ranks=1) == 0.25
    assert slices.cores(ps=False, ranks=3) == pytest.approx(0.75)
    assert slices.cores(ps=True, ranks=1) == 0.2
    for bad in (0.05, 0.0, -1.0, True):
        with pytest.raises(ValueError, match="device_cores"):
            DeviceSlices(bad, 0.2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ps_cores"):
        DeviceSlices(0.3, 0.01)


def test_each_command_of_a_job_is_sized_as_an_agent_sizes_its_task() -> None:
    ps = TrainConfig(model="mlp", checkpoint_dir="/tmp/ck", arch="ps", num_workers=2, num_ps=1)
    assert len(commands(ps)) == 3
    assert command_shares(ps) == [(True, 1), (False, 1), (False, 1)]
    ring = TrainConfig(
        model="mlp",
        checkpoint_dir="/tmp/ck",
        arch="allreduce",
        num_workers=3,
        launcher=Launcher.TORCHRUN,
    )
    assert len(commands(ring)) == 1 and command_shares(ring) == [(False, 3)]
    direct = TrainConfig(
        model="mlp",
        checkpoint_dir="/tmp/ck",
        arch="allreduce",
        num_workers=2,
        launcher=Launcher.DIRECT,
    )
    assert command_shares(direct) == [(False, 1), (False, 1)]
    hvd = TrainConfig(
        model="mlp",
        checkpoint_dir="/tmp/ck",
        arch="allreduce",
        num_workers=2,
        backend=Backend.HOROVOD,
    )
    assert command_shares(hvd) == [(False, 2)]  # one horovodrun (when installed) for both


def test_the_own_group_is_read_for_v1_and_v2(tmp_path: Path) -> None:
    proc = tmp_path / "cgroup"
    proc.write_text("12:memory:/x\n4:cpu,cpuacct:/mlsched/c1/h0\n0::/user.slice\n")
    v1 = CpuControl(tmp_path / "cpu", 1)
    assert own_group(v1, proc) == tmp_path / "cpu" / "mlsched" / "c1" / "h0"
    v2 = CpuControl(tmp_path / "unified", 2)
    assert own_group(v2, proc) == tmp_path / "unified" / "user.slice"
    proc.write_text("4:cpu,cpuacct:/\n")
    assert own_group(v1, proc) == v1.root
    assert own_group(v1, tmp_path / "missing") == v1.root


def test_bad_slices_are_refused_by_field_and_flag() -> None:
    with pytest.raises(SpecError, match="cpus"):
        Settings(cpus=0.5, device_cores=0.3)
    with pytest.raises(SpecError, match="ps_cores"):
        Settings(ps_cores=0.3)
    with pytest.raises(SpecError, match="device_cores"):
        Settings(device_cores=0.01)
    assert Settings(device_cores=0.3).to_dict()["ps_cores"] == 0.3  # defaults to a device's
    assert "device_cores" not in Settings().to_dict()  # old files resume unchanged
    with pytest.raises(SpecError, match="ps_cores"):
        EmulationSpec(ps_cores=0.2)
    with pytest.raises(SpecError, match="device_cores"):
        EmulationSpec(gpus=0, device_cores=0.3)
    spec = EmulationSpec(device_cores=0.25, ps_cores=0.2)
    assert EmulationSpec.from_dict(spec.to_dict()) == spec
    parser = argparse.ArgumentParser()
    add_agent_args(parser)
    args = parser.parse_args(["--controller", "127.0.0.1:1", "--ps-cores", "0.2"])
    with pytest.raises(SpecError, match="--ps-cores"):
        agent_from_args(args)
    args = parser.parse_args(["--controller", "127.0.0.1:1", "--device-cores", "0.01"])
    with pytest.raises(SpecError, match="--device-cores"):
        agent_from_args(args)
    args = parser.parse_args(
        ["--controller", "127.0.0.1:1", "--device-cores", "0.3", "--ps-cores", "0.01"]
    )
    with pytest.raises(SpecError, match="--ps-cores"):
        agent_from_args(args)
    with pytest.raises(SpecError, match="ps_cores"):
        Settings(device_cores=0.3, ps_cores=0.01)


@needs_cgroups
def test_a_command_runs_inside_its_slice_at_its_share_and_the_slice_goes_away() -> None:
    assert _CONTROL is not None
    groups = SliceGroups(
        _CONTROL, _CONTROL.root / "mlsched" / "test-slices", DeviceSlices(0.2, 0.1)
    )
    burn = [sys.executable, "-c", "while True: pass"]
    try:
        argv = groups.argv("task-a", groups.slices.cores(ps=False, ranks=2), burn)
        path = groups.parent / "task-a"
        quota = (path / "cpu.cfs_quota_us").read_text() if _CONTROL.version == 1 else (
            (path / "cpu.max").read_text().split()[0]
        )  # fmt: skip
        assert int(quota) == round(0.4 * PERIOD_US)
        proc = psutil.Popen(argv)
        try:
            time.sleep(0.3)  # the shell moves itself in, then becomes the command
            assert proc.pid in group_pids(path)
            proc.cpu_percent(None)
            time.sleep(1.5)
            share = proc.cpu_percent(None) / 100
            assert 0.25 <= share <= 0.48, f"{share:.2f} cores in a 0.4-core slice"
        finally:
            groups.release("task-a")  # kills what is left in it
        proc.wait(timeout=5)
        assert not path.exists()
    finally:
        groups.close()
    assert not groups.parent.exists()


@needs_cgroups
def test_a_group_with_subgroups_is_removed_with_them() -> None:
    assert _CONTROL is not None
    host = _CONTROL.root / "mlsched" / "test-host"
    make_group(_CONTROL, host, 0.5)
    make_group(_CONTROL, host / "slices" / "t1", 0.2)
    assert remove_group(host, stop_at=_CONTROL.root)
    assert not host.exists()


def test_the_demo_refuses_slices_and_profiles_it_cannot_use(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mlsched.cli import main

    assert main(["demo", "--ps-cores", "0.2"]) == 2
    assert "--ps-cores" in capsys.readouterr().err
    assert main(["demo", "--measure-profile", "--device-cores", "0.3"]) == 2
    assert "--measure-profile" in capsys.readouterr().err
