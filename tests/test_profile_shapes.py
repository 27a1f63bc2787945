"""Profile cells measured in a placement shape, and where a probe puts its processes.

Plausible bugs this catches: a cell's shape left out of its key (a rack cell replacing the
one-machine cell of the same job), a malformed shape accepted, a file of one-machine cells
written with a new field older files lack, the simulator adding modelled wire time to a
cell that measured its links (counted twice) or taking a cell of another shape before the
placement's own, Gavel's table given two entries for one job and scale, and a probe that
packs a "rack" probe on one host or keeps a "racks" probe inside one rack.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlsched.controller.agents import AgentInfo
from mlsched.controller.probes import probe_layout
from mlsched.core import Cluster, JobSpec, Placement, Pool, ResourceVector, Server, SpecError
from mlsched.core.job import Arch, SyncMode
from mlsched.engine.simulator import SimulatedExecutor, TruthConfig
from mlsched.perfmodel.profile import Cell, Profile, load_profile, to_gavel
from mlsched.perfmodel.profiled import ProfileLookup, placement_shape

LOCAL = Cell("mlp", "ring", 2, "cpu", 0.03, compute_s=0.02, comm_s=0.01)
RACK = Cell("mlp", "ring", 2, "cpu", 0.05, compute_s=0.02, comm_s=0.03, placement="rack")
RACKS = Cell("mlp", "ring", 2, "cpu", 0.09, compute_s=0.02, comm_s=0.07, placement="racks")


def _profile(*cells: Cell) -> Profile:
    return Profile({"controller": "c"}, {"type": "cpu"}, {"batch_size": 8}, cells=cells)


def _cluster() -> Cluster:
    return Cluster(
        tuple(
            Server(f"s{i}", ResourceVector({"gpu": 2, "cpu": 4}), pool=Pool.BOTH,
                   gpu_type="cpu", rack=f"r{i // 2}", uplink_gbps=1.0)
            for i in range(4)
        )
    )  # fmt: skip


def _ring() -> JobSpec:
    return JobSpec(
        "j", model="mlp", arch=Arch.ALLREDUCE, sync=SyncMode.SYNC, batch_size=8,
        chunks=1, batches_per_chunk=10_000, max_workers=2, requested_workers=2,
        worker=ResourceVector({"gpu": 1}), compute_s=0.01, gradient_mb=5.0,
    )  # fmt: skip


def test_cells_of_one_job_in_different_shapes_are_kept_apart(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    _profile(LOCAL, RACK, RACKS).save(path)
    loaded = load_profile(path)
    assert loaded.cell("mlp", "ring", 2, "cpu") == LOCAL
    assert loaded.cell("mlp", "ring", 2, "cpu", "racks") == RACKS
    raw = json.loads(path.read_text())
    assert [c.get("placement") for c in raw["cells"]] == [None, "rack", "racks"]
    assert "placement" not in raw["cells"][0]  # one-machine cells read as older files'


@pytest.mark.parametrize(
    ("cell", "why"),
    [
        ({"placement": "datacenter"}, "one of host, rack, racks"),
        ({"placement": "rack", "workers": 1}, "host (one process per host)"),
    ],
)
def test_a_bad_shape_is_refused_naming_the_cell_field(cell: dict, why: str) -> None:
    raw = _profile(LOCAL).to_dict()
    raw["cells"][0].update(cell)
    with pytest.raises(SpecError, match=r"cells\[0\]\.placement") as err:
        Profile.from_dict(raw)
    assert why in str(err.value)


def test_the_lookup_takes_the_placements_own_shape_then_a_one_machine_cell() -> None:
    lookup = ProfileLookup(_profile(LOCAL, RACK, RACKS))
    job = _ring()
    assert lookup.match(job, 2, "cpu", "racks").cell == RACKS  # type: ignore[union-attr]
    assert lookup.match(job, 2, "cpu", "host").cell == LOCAL  # type: ignore[union-attr]
    only_spread = ProfileLookup(_profile(RACK))
    assert only_spread.match(job, 2, "cpu", "host").cell == RACK  # type: ignore[union-attr]


def test_placement_shapes_follow_hosts_and_racks() -> None:
    cluster = _cluster()
    assert placement_shape(Placement(((0, 2),)), cluster) == "host"
    assert placement_shape(Placement(((0, 1), (1, 1))), cluster) == "rack"
    assert placement_shape(Placement(((1, 1), (2, 1))), cluster) == "racks"
    assert placement_shape(Placement(((0, 1),), ((2, 1),)), cluster) == "racks"  # the PS counts


def _iteration_s(profile: Profile, p: Placement) -> float:
    sim = SimulatedExecutor(_cluster(), 10.0, truth=TruthConfig(profile=profile))
    parts = sim._true_parts(_ring(), p)
    return parts.compute + parts.comm


def test_the_simulator_adds_wire_time_only_to_a_cell_that_crossed_no_link() -> None:
    across = Placement(((1, 1), (2, 1)))
    in_rack = Placement(((0, 1), (1, 1)))
    local_only = _iteration_s(_profile(LOCAL), across)
    assert local_only > LOCAL.iteration_s + 1e-6  # loopback cell + the modelled wire
    assert _iteration_s(_profile(LOCAL, RACK, RACKS), across) == pytest.approx(RACKS.iteration_s)
    assert _iteration_s(_profile(LOCAL, RACK, RACKS), in_rack) == pytest.approx(RACK.iteration_s)
    # A measured shape of another kind stands in as measured: no wire added on top.
    assert _iteration_s(_profile(RACK), across) == pytest.approx(RACK.iteration_s)


def test_gavel_export_has_one_entry_per_job_and_scale_preferring_one_machine() -> None:
    table = to_gavel(_profile(RACKS, LOCAL, RACK))
    assert table == {"cpu": {"('mlp (batch size 8)', 2)": {"null": pytest.approx(1 / 0.03)}}}
    assert to_gavel(_profile(RACKS, RACK))["cpu"]["('mlp (batch size 8)', 2)"]["null"] == (
        pytest.approx(1 / 0.05)
    )


def _agent(name: str, rack: str, gpus: int = 1) -> AgentInfo:
    return AgentInfo(name, "127.0.0.1", {"gpu": float(gpus), "cpu": 2.0}, rack=rack)


AGENTS = [_agent("a", "r0"), _agent("b", "r0"), _agent("c", "r1"), _agent("d", "r1", gpus=2)]


def test_a_probe_layout_has_the_shape_it_names() -> None:
    assert probe_layout(AGENTS, 2, 0, "host") == (("d", 2, 0),)
    assert probe_layout(AGENTS, 2, 1, "rack") == (("a", 1, 1), ("b", 1, 0))
    racks = probe_layout(AGENTS, 2, 0, "racks")
    rack_of = {a.agent_id: a.rack for a in AGENTS}
    assert len({rack_of[a] for a, _, _ in racks}) == 2 and len(racks) == 2
    # One worker and its PS: the PS on a host of its own, in the other rack.
    assert probe_layout(AGENTS, 1, 1, "racks") == (("a", 1, 0), ("c", 0, 1))


@pytest.mark.parametrize(
    ("workers", "ps", "placement", "why"),
    [
        (3, 0, "host", "an idle agent with 3 devices"),
        (3, 0, "rack", "3 idle agents in one rack"),
        (1, 0, "rack", "a single process needs one host"),
        (5, 0, "racks", "5 idle agents in two or more racks"),
    ],
)
def test_a_shape_the_agents_cannot_give_is_refused(
    workers: int, ps: int, placement: str, why: str
) -> None:
    with pytest.raises(SpecError, match="placement") as err:
        probe_layout(AGENTS, workers, ps, placement)
    assert why in str(err.value)
