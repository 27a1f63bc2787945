"""Emulated hosts have CPUs of their own: a process on a host runs at the host's share,
whatever else runs on the machine.

Plausible bugs this catches: the agent started outside its host's group (its trainers then
take any core), a quota written in the wrong unit (cores read as microseconds), groups left
behind by teardown, a quota without a reservation (a crowded machine then starves the
hosts below it), a default share that oversubscribes the machine (the hosts then slow
each other down again), and the cpu controller's mount misread.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from mlsched.core.errors import SpecError
from mlsched.testbed.emulated.cluster import EmulatedCluster
from mlsched.testbed.emulated.netns import EmulationUnavailable, missing_requirements
from mlsched.testbed.emulated.topology import EmulationSpec
from mlsched.trainers.cpu_share import CPU_MOUNT_ENV, PERIOD_US, WEIGHT, cpu_control

pytestmark = pytest.mark.processes

_CONTROL, _WHY = cpu_control()
_MISSING = [*missing_requirements(), *([] if _CONTROL else [_WHY])]
needs_root = pytest.mark.skipif(bool(_MISSING), reason="; ".join(_MISSING) or "ok")

BURN = [sys.executable, "-c", "while True: pass"]


def test_the_cpu_controller_is_found_in_v1_and_v2_mounts(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1cpu", tmp_path / "unified"
    v1.mkdir()
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"cgroup {tmp_path}/v1mem cgroup rw,relatime,memory 0 0\n"
        f"cgroup {v1} cgroup rw,relatime,cpu 0 0\n"
    )
    control, why = cpu_control(mounts)
    assert control is not None and (control.root, control.version, why) == (v1, 1, "")
    mounts.write_text(f"cgroup2 {v2} cgroup2 rw,nosuid 0 0\n")
    control, _ = cpu_control(mounts)
    assert control is not None and (control.root, control.version) == (v2, 2)
    (v2 / "cgroup.controllers").write_text("memory pids\n")
    control, why = cpu_control(mounts)
    assert control is None and "no cgroup cpu controller" in why


def test_a_cluster_s_own_mount_is_used_before_another_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside a namespace every emulated cluster's bind of the hierarchy is visible, a
    crashed one's too: an agent that took the first would make its tasks' groups through a
    mount another cluster's teardown unmounts (the first mount found, before this rule)."""
    stale, own = tmp_path / "cgroup-old", tmp_path / "cgroup-new"
    stale.mkdir()
    own.mkdir()
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"cgroup {stale} cgroup rw,relatime,cpu 0 0\ncgroup {own} cgroup rw,relatime,cpu 0 0\n"
    )
    monkeypatch.delenv(CPU_MOUNT_ENV, raising=False)
    control, _ = cpu_control(mounts)
    assert control is not None and control.root == stale
    monkeypatch.setenv(CPU_MOUNT_ENV, str(own))
    control, _ = cpu_control(mounts)
    assert control is not None and control.root == own
    monkeypatch.setenv(CPU_MOUNT_ENV, str(tmp_path / "not-mounted"))
    control, _ = cpu_control(mounts)
    assert control is not None and control.root == stale  # named but absent: the first


def test_a_share_that_oversubscribes_the_machine_is_refused_by_name() -> None:
    assert EmulationSpec(hosts=4).cpu_share(2) == pytest.approx(0.45)
    assert EmulationSpec(hosts=2, host_cpus=1.0).cpu_share(2) == 1.0
    with pytest.raises(SpecError, match="host_cpus"):
        EmulationSpec(hosts=4, host_cpus=0.6).cpu_share(2)
    with pytest.raises(SpecError, match="host_cpus"):
        EmulationSpec(host_cpus=0.0)
    with pytest.raises(SpecError, match="host_cpus"):
        EmulationSpec(hosts=24).cpu_share(2)  # 0.075 each: below the kernel's 0.1
    spec = EmulationSpec(hosts=2, host_cpus=0.5, isolate_cpu=False)
    assert EmulationSpec.from_dict(spec.to_dict()) == spec


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[EmulatedCluster]:
    try:
        made = EmulatedCluster.create(request.param, tmp_path / "state.json")
    except EmulationUnavailable as err:
        pytest.skip(str(err))
    groups = [Path(g) for g in made.state.cpu_groups.values()]
    yield made
    made.close(grace_s=2.0)
    assert not any(g.exists() for g in groups), "teardown left a cpu group"
    assert not any(g.parent.exists() for g in groups), "teardown left the cluster's group"


def _cores_used(procs: list[psutil.Process], seconds: float) -> list[float]:
    """Cores each process used over ``seconds`` of wall time."""
    before = [sum(p.cpu_times()[:2]) for p in procs]
    time.sleep(seconds)
    return [sum(p.cpu_times()[:2]) - b for p, b in zip(procs, before, strict=True)]


SHARE = 0.4  # two hosts take 0.8 of 2 cores: a quota the machine can keep whatever else runs
#: Busy processes outside the hosts: more than the cores, so that without a reservation a
#: host's fair share of the machine (2 cores over 8 runnable entities) falls below its quota.
OUTSIDE = 6


@needs_root
@pytest.mark.parametrize(
    "cluster", [EmulationSpec(hosts=2, racks=1, host_cpus=SHARE)], indirect=True
)
def test_a_host_runs_at_its_share_whatever_else_runs(cluster: EmulatedCluster) -> None:
    assert _CONTROL is not None
    weight_file, weight = WEIGHT[_CONTROL.version]
    for path in map(Path, cluster.state.cpu_groups.values()):
        if (path / "cpu.cfs_quota_us").exists():
            assert int((path / "cpu.cfs_quota_us").read_text()) == SHARE * PERIOD_US
        for group in (path, path.parent, path.parent.parent):  # host, cluster, mlsched
            assert (group / weight_file).read_text().strip() == weight
    h0, h1 = cluster.plan.hosts
    burner = psutil.Process(cluster.spawn("agent", "burn0", BURN, netns=h0.netns).pid)
    time.sleep(0.3)  # past its start
    [alone] = _cores_used([burner], 1.0)
    cluster.spawn("agent", "burn1", BURN, netns=h1.netns)
    # Each in a session of its own, as other tests' and tools' processes are: the kernel
    # groups processes by session (autogroup), so each is then as heavy as a whole host.
    outside = [psutil.Popen(BURN, start_new_session=True) for _ in range(OUTSIDE)]
    try:
        time.sleep(0.3)
        [crowded] = _cores_used([burner], 1.0)
    finally:
        for p in outside:
            p.kill()
            p.wait()
    others = OUTSIDE + 1
    print(f"h0's process: {alone:.2f} cores alone, {crowded:.2f} beside {others} others ({SHARE})")
    assert SHARE * 0.8 <= alone <= SHARE * 1.1
    assert SHARE * 0.8 <= crowded <= SHARE * 1.1
    assert "0.4 cores per host" in cluster.cpu_isolation


PROBE = [
    sys.executable, "-c",
    "from mlsched.trainers.cpu_share import cpu_control, own_group\n"
    "c, why = cpu_control()\n"
    "print('GROUP', own_group(c) if c else 'none: ' + why, flush=True)",
]  # fmt: skip


@needs_root
@pytest.mark.parametrize(
    "cluster",
    [EmulationSpec(hosts=1, racks=1, host_cpus=0.5, device_cores=0.3, ps_cores=0.2)],
    indirect=True,
)
def test_an_agent_inside_a_host_finds_its_group_to_slice(cluster: EmulatedCluster) -> None:
    """``ip netns exec`` mounts a fresh /sys: without the cluster's bind of the cpu
    hierarchy an agent with device slices cannot make its tasks' groups (it exits)."""
    mount = Path(cluster.state.cpu_mount)
    assert mount.is_dir() and (mount / "mlsched").is_dir()
    [h0] = cluster.plan.hosts
    probe = cluster.spawn("agent", "probe", PROBE, netns=h0.netns)
    probe.wait(timeout=30)
    text = (cluster.files / "logs" / "probe.log").read_text()
    group = Path(cluster.state.cpu_groups[h0.netns])
    expected = mount / group.relative_to(group.parents[2])  # <mount>/mlsched/<id>/h0
    assert f"GROUP {expected}" in text, text
    argv = cluster.agent_argv(h0, "203.0.113.1:9")  # nothing listens: it keeps retrying
    assert argv[argv.index("--device-cores") + 1] == "0.3"
    assert argv[argv.index("--ps-cores") + 1] == "0.2"
    agent = cluster.spawn("agent", "h0", argv, netns=h0.netns)
    time.sleep(4.0)
    assert agent.poll() is None, (cluster.files / "logs" / "h0.log").read_text()
    cluster.close(grace_s=5.0)
    assert not mount.exists()
