"""The hetero-paper workload (spec 002 §5): ranges, both architectures, hostile options."""

from __future__ import annotations

import pytest

from mlsched.core.errors import SpecError
from mlsched.core.job import Arch
from mlsched.workloads import load_workload
from mlsched.workloads.hetero import hetero_paper


def test_paper_ranges_types_and_both_architectures():
    w = hetero_paper(seed=3, jobs=60, servers=12)
    assert {j.arch for j in w.jobs} == {Arch.PS, Arch.ALLREDUCE}
    assert {s.gpu_type for s in w.cluster.servers} == {"V100", "K80", "M60"}
    for j in w.jobs:
        assert 200 <= j.weight <= 5000 and 5 <= j.chunks <= 50 and 0 <= j.arrival_slot < 75
        assert len(j.worker_types) == 8 and len(j.ps_types) == (10 if j.uses_ps else 0)
        # a faster type never computes slower (v100x4 four V100s, k80x1 one K80)
        assert j.compute_s_for("v100x4") < j.compute_s_for("v100x1") < j.compute_s_for("k80x1")
    assert w.horizon_slots == 16 * 150
    assert w.runtime == {"ps_sync": "hetero", "allreduce": "hetero"}


def test_same_seed_same_jobs_whatever_the_servers():
    a = hetero_paper(seed=1, jobs=10, servers=6)
    b = hetero_paper(seed=1, jobs=10, servers=30)
    assert a.jobs == b.jobs
    assert hetero_paper(seed=2, jobs=10).jobs != a.jobs
    assert load_workload("hetero-paper").name == "hetero-paper"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("jobs", 0),
        ("servers", -1),
        ("horizon", 1),
        ("arrivals", "bursty"),
        ("ra_share", 1.5),
        ("run_slots", 10),
        ("slot_seconds", 0),
    ],
)
def test_bad_settings_name_the_field(field: str, value: object):
    with pytest.raises(SpecError, match=field):
        hetero_paper(**{field: value})  # type: ignore[arg-type]
