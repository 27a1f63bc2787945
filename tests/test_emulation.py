"""The emulated cluster: its plan, its real namespaces and shaped links, and its command.

Tests that build namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2; without
them they are skipped with the reason. Every cluster a test makes is removed by the fixture's
finalizer through the same path as ``mlsched cluster down``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mlsched.core.errors import SpecError
from mlsched.testbed.emulated.cluster import EmulatedCluster
from mlsched.testbed.emulated.netns import (
    EmulationUnavailable,
    ip,
    missing_requirements,
    netns_names,
)
from mlsched.testbed.emulated.shaping import read_rate_bits
from mlsched.testbed.emulated.state import ClusterState, ProcessEntry, process_start_time
from mlsched.testbed.emulated.topology import DATA_NET, MGMT_NETS, EmulationSpec, plan_network
from mlsched.trainers.cpu_share import cpu_control, group_pids

pytestmark = pytest.mark.processes  # training processes: one such test at a time

_MISSING = missing_requirements()
needs_root = pytest.mark.skipif(bool(_MISSING), reason="; ".join(_MISSING) or "ok")

_TEST_NETS = (DATA_NET, *MGMT_NETS)

Make = Callable[..., EmulatedCluster]


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Make]:
    """Build clusters in the test's directory; every one is torn down afterwards."""
    made: list[EmulatedCluster] = []

    def make(spec: EmulationSpec, name: str = "c") -> EmulatedCluster:
        try:
            cluster = EmulatedCluster.create(spec, tmp_path / name / "state.json")
        except EmulationUnavailable as err:
            pytest.skip(str(err))
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close(grace_s=5.0)
        assert not set(cluster.state.namespaces) & netns_names()
        assert not any((Path("/etc/netns") / ns).exists() for ns in cluster.state.namespaces)
        assert not any(Path(g).exists() for g in cluster.state.cpu_groups.values())


def _in_test_nets(addr: str) -> bool:
    return any(ipaddress.IPv4Address(addr) in net for net in _TEST_NETS)


# The plan (no privileges needed) -------------------------------------------------------------
def test_plan_fills_racks_in_order_with_documentation_addresses() -> None:
    plan = plan_network(EmulationSpec(hosts=5, racks=2), "a1b2c3", block=3)
    assert [h.rack for h in plan.hosts] == ["rack0"] * 3 + ["rack1"] * 2
    assert [h.bridge for h in plan.hosts] == ["r0"] * 3 + ["r1"] * 2
    assert [u.rack for u in plan.uplinks] == ["rack0", "rack1"]
    addrs = [plan.controller_addr] + [a for h in plan.hosts for a in (h.data_addr, h.mgmt_addr)]
    assert all(_in_test_nets(a) for a in addrs) and len(set(addrs)) == len(addrs)
    assert all(n.startswith("mlsched-a1b2c3-") for n in plan.namespaces)
    assert len(plan.root_link) <= 15  # IFNAMSIZ: the one name made in the root namespace
    assert "a1b2c3" in plan.root_link
    # Another block: another controller address; the data plane (inside the namespaces only)
    # may repeat.
    other = plan_network(EmulationSpec(hosts=5, racks=2), "d4e5f6", block=4)
    assert other.controller_addr != plan.controller_addr
    assert plan_network(EmulationSpec(hosts=3, racks=1), "a1b2c3", 0).uplinks == ()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"hosts": 0}, "hosts"),
        ({"hosts": 2, "racks": 3}, "racks"),
        ({"host_gbps": 0.0}, "host_gbps"),
        ({"rack_gbps": 100.0}, "rack_gbps"),
        ({"rtt_ms": -1.0}, "rtt_ms"),
        ({"hosts": 2, "racks": 1, "pools": ("ps",)}, "pools"),
        ({"hosts": 1, "racks": 1, "pools": ("gpu",)}, "pools[0]"),
    ],
)
def test_spec_refuses_bad_values_by_name(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError) as err:
        EmulationSpec(**kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


def test_state_file_round_trip_and_process_identity(tmp_path: Path) -> None:
    state = ClusterState(tmp_path / "s" / "state.json", "abcdef", EmulationSpec().to_dict(), 2)
    me = ProcessEntry("agent", "h0", os.getpid(), process_start_time(os.getpid()) or 0)
    state.add_namespace("mlsched-abcdef-h0")
    state.add_process(me)
    loaded = ClusterState.load(state.path)
    assert loaded.namespaces == ["mlsched-abcdef-h0"] and loaded.block == 2
    assert loaded.processes[0].alive()
    assert EmulationSpec.from_dict(loaded.spec) == EmulationSpec()
    # The same pid with another start time is another process (a reused pid): not ours.
    assert not ProcessEntry("agent", "h0", os.getpid(), me.start_time + 1).alive()


# Real namespaces and links ---------------------------------------------------------------
@needs_root
def test_links_carry_their_shaped_rates_and_nothing_routes_out(make_cluster: Make) -> None:
    links_before = {e["ifname"] for e in json.loads(ip("-j", "link", "show"))}
    # Rates a Python sender reaches with CPU to spare while another test runs beside this
    # one: the shaper, not the CPU, must be what limits the measured throughput (at 1 Gbit/s
    # a CPU-starved sender measured 0.66 and failed for the wrong reason).
    cluster = make_cluster(EmulationSpec(hosts=3, racks=2, host_gbps=0.4, rack_gbps=0.1))
    plan = cluster.plan
    assert set(plan.namespaces) <= netns_names()
    h0 = plan.hosts[0]
    assert read_rate_bits(h0.netns, "eth0") == 400_000_000
    assert read_rate_bits(plan.fabric_ns, "u0") == 100_000_000
    in_rack = cluster.measure_gbps("h0", "h1", seconds=0.5)
    back = cluster.measure_gbps("h1", "h0", seconds=0.5)
    cross = cluster.measure_gbps("h2", "h0", seconds=0.5)
    print(f"in-rack {in_rack:.3f} / {back:.3f} Gbit/s (0.4 shaped), cross {cross:.3f} (0.1)")
    assert 0.32 <= in_rack <= 0.42 and 0.32 <= back <= 0.42
    assert 0.08 <= cross <= 0.105
    # The root namespace gained one link, holding the controller's address only.
    links_after = {e["ifname"] for e in json.loads(ip("-j", "link", "show"))}
    assert links_after - links_before == {plan.root_link}
    held = json.loads(ip("-j", "-4", "addr", "show", "dev", plan.root_link))
    assert [a["local"] for a in held[0]["addr_info"]] == [plan.controller_addr]
    # No namespace of the cluster has a route beyond its own subnets: nothing leaves.
    for ns in plan.namespaces:
        for route in json.loads(ip("-j", "-4", "route", "show", ns=ns) or "[]"):
            assert route["dst"] != "default" and _in_test_nets(route["dst"].split("/")[0])


@needs_root
def test_two_clusters_side_by_side_do_not_collide(make_cluster: Make) -> None:
    a = make_cluster(EmulationSpec(hosts=1, racks=1), "a")
    b = make_cluster(EmulationSpec(hosts=1, racks=1), "b")
    assert a.plan.cluster_id != b.plan.cluster_id
    assert a.controller_host != b.controller_host
    assert not set(a.plan.namespaces) & set(b.plan.namespaces)
    a.close()
    names = netns_names()
    assert not set(a.plan.namespaces) & names and set(b.plan.namespaces) <= names
    assert not a.state.path.exists() and b.state.path.exists()
    assert a.close() == []  # twice: nothing left to remove


@needs_root
def test_rtt_needs_netem_and_adds_the_delay_between_racks(
    make_cluster: Make, tmp_path: Path
) -> None:
    before = netns_names()
    spec = EmulationSpec(hosts=2, racks=2, rtt_ms=20.0)
    try:
        cluster = EmulatedCluster.create(spec, tmp_path / "rtt" / "state.json")
    except EmulationUnavailable as err:
        # This kernel has no netem: a clear error, and nothing of the cluster left behind.
        assert "netem" in str(err) and "--rtt-ms" in str(err)
        assert netns_names() == before
        assert not (tmp_path / "rtt" / "state.json").exists()
        return
    try:
        rtt = cluster.measure_rtt_ms("h0", "h1", count=10)
        assert 18.0 <= rtt <= 40.0, rtt
    finally:
        cluster.close()


# The command -----------------------------------------------------------------------------
def _mlsched(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mlsched", *args],
        capture_output=True,
        text=True,
        timeout=150,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        check=False,
    )


@needs_root
def test_cluster_up_then_down_after_a_crash(tmp_path: Path) -> None:
    state_path = tmp_path / "run" / "state.json"
    up = _mlsched(
        "cluster", "up", "--hosts", "2", "--racks", "2", "--state", str(state_path), "--json"
    )
    try:
        if up.returncode == 2 and "needs" in up.stderr:
            pytest.skip(up.stderr.strip())
        assert up.returncode == 0, up.stderr
        info = json.loads(up.stdout)
        state = ClusterState.load(state_path)
        assert state.phase == "up" and set(state.namespaces) <= netns_names()
        procs = {p.name: p for p in state.processes}
        assert set(procs) == {"controller", "h0", "h1"} and all(p.alive() for p in procs.values())
        assert procs["h0"].netns == info["hosts"][0]["netns"] and procs["controller"].netns == ""
        # Each agent runs in its host's cpu group where the machine has the controller, and
        # no host has one where it has not.
        groups = {ns: Path(g) for ns, g in state.cpu_groups.items()}
        assert info["cpu_groups"] == state.cpu_groups
        if cpu_control()[0] is None:
            assert groups == {}
        else:
            for name in ("h0", "h1"):
                assert procs[name].netns in groups, f"{name} has no cpu group: {groups}"
                assert procs[name].pid in group_pids(groups[procs[name].netns])
        # The agents registered with their namespace addresses as their hosts, in their racks.
        status = _mlsched(
            "status", "--json", "--controller", state.controller,
            "--token-file", info["token_file"],
        )  # fmt: skip
        assert status.returncode == 0, status.stderr
        agents = {a["name"]: a for a in json.loads(status.stdout)["cluster"]["agents"]}
        assert {n: a["host"] for n, a in agents.items()} == {
            h["name"]: h["data_addr"] for h in info["hosts"]
        }
        # A second `up` on the same state file is refused while the cluster is up.
        again = _mlsched(
            "cluster", "up", "--hosts", "1", "--racks", "1", "--state", str(state_path)
        )
        assert again.returncode == 2 and "is up" in again.stderr
        # A crash: the controller and an agent die without cleaning up.
        for name in ("controller", "h0"):
            os.kill(procs[name].pid, signal.SIGKILL)
        time.sleep(0.3)
    finally:
        down = _mlsched("cluster", "down", "--state", str(state_path))
    assert down.returncode == 0, down.stderr
    assert "removed" in down.stdout
    assert not set(state.namespaces) & netns_names()
    assert not any(p.alive() for p in state.processes)
    assert not state_path.exists()
    assert not any(g.exists() for g in groups.values())
    again = _mlsched("cluster", "down", "--state", str(state_path))
    assert again.returncode == 0 and "nothing to remove" in again.stdout


def test_up_without_privileges_or_tools_says_what_is_missing(tmp_path: Path) -> None:
    state_path = tmp_path / "x" / "state.json"
    args = ("cluster", "up", "--hosts", "1", "--racks", "1", "--state", str(state_path))
    no_tools = _mlsched(*args, env={"PATH": str(tmp_path)})  # no `ip`, no `tc`
    assert no_tools.returncode == 2
    assert "the `ip` command" in no_tools.stderr and "the `tc` command" in no_tools.stderr
    if shutil.which("setpriv") is not None:
        dropped = subprocess.run(
            ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--",
             sys.executable, "-m", "mlsched", *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert dropped.returncode == 2, dropped.stderr
        assert "CAP_NET_ADMIN" in dropped.stderr
    assert not state_path.parent.exists()  # nothing made


# The commands' checks and the experiment's pure parts -----------------------------------------
def test_commands_refuse_what_they_cannot_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlsched.cli import main

    assert main(["demo", "--emulate", "--simulated"]) == 2
    assert "--emulate" in capsys.readouterr().err
    assert main(["experiment", "testbed"]) == 2  # it only runs on an emulated cluster
    assert "--emulate" in capsys.readouterr().err
    assert main(["experiment", "oasis", "--emulate"]) == 2
    assert "testbed" in capsys.readouterr().err
    bad = tmp_path / "topology.yaml"
    bad.write_text("rack_core_gbps: -1\n", encoding="utf-8")
    assert main(["controller", "--topology", str(bad), "--db", str(tmp_path / "db")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "rack_core_gbps" in err


def test_testbed_workload_is_the_emulated_cluster_and_fidelity_compares_jcts() -> None:
    from mlsched.engine.builder import SimulationConfig, simulate
    from mlsched.engine.summary import jct_s
    from mlsched.testbed.experiment import fidelity_rows, testbed_workload

    spec = EmulationSpec(hosts=4, racks=2, host_gbps=1.0, rack_gbps=0.2)
    workload = testbed_workload(spec, slot_seconds=5.0)
    cluster = workload.cluster
    assert [s.rack for s in cluster.servers] == ["rack0", "rack0", "rack1", "rack1"]
    assert cluster.path_gbps(0, 1) == 1.0 and cluster.path_gbps(0, 2) == 0.2
    # Two different runs, as the experiment compares: "measured" with every job's compute
    # twice as long, "simulated" without the last job. A run compared with itself would
    # pass with the two arguments swapped or one of them read twice.
    slowed = dataclasses.replace(
        workload,
        jobs=tuple(dataclasses.replace(j, compute_s=2 * j.compute_s) for j in workload.jobs),
    )
    measured = simulate(slowed, SimulationConfig("fifo"))
    dropped = workload.jobs[-1].job_id
    short = dataclasses.replace(workload, jobs=workload.jobs[:-1])
    simulated = simulate(short, SimulationConfig("fifo"))
    rows = {r["job_id"]: r for r in fidelity_rows(measured, simulated)}
    assert set(rows) == {j.job_id for j in workload.jobs}
    assert rows[dropped]["jct_simulated_s"] is None
    assert rows[dropped]["measured_over_simulated"] is None
    ratios = []
    for job_id, r in rows.items():
        jm = jct_s(measured.records[job_id], measured.slot_seconds)
        assert r["jct_measured_s"] == jm and r["state_measured"] == "done"
        if job_id == dropped:
            continue
        js = jct_s(simulated.records[job_id], simulated.slot_seconds)
        assert r["jct_simulated_s"] == js
        assert r["measured_over_simulated"] == pytest.approx(jm / js)
        ratios.append(jm / js)
    assert max(ratios) > 1.0  # twice the compute takes longer somewhere
