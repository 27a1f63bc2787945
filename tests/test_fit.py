"""fit_linear: recovery of known parameters, pinning, failure handling and residuals.

Samples are built the way :class:`RuntimeEstimator` builds them: for every measured
configuration, the family's compute row is paired with the measured compute time and its
communication row with the measured communication time, and all rows are stacked.
"""

from __future__ import annotations

import numpy as np
import pytest

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster, Server, Topology
from mlsched.core.job import JobSpec
from mlsched.perfmodel import FAMILIES, FitResult, PerfFamily, fit_linear
from mlsched.perfmodel import fit as fit_module

CL = Cluster(
    (
        Server("s0", {"cpu": 32}, rack="a", uplink_gbps=10.0),
        Server("s1", {"cpu": 32}, rack="a", uplink_gbps=10.0),
        Server("s2", {"cpu": 32}, rack="b", uplink_gbps=25.0),
        Server("s3", {"cpu": 32}, rack="b", uplink_gbps=25.0),
    ),
    Topology(100.0, 400.0, {"b": 4.0}),
)

# Per family: a job, configurations that identify every parameter, and the true parameters
# as multiples of the prior (compute slower, communication slower or faster).
CONFIGS: dict[str, tuple[JobSpec, list[Placement]]] = {
    "ps_async": (
        JobSpec(
            job_id="a",
            sync="async",
            compute_s=0.2,
            gradient_mb=40.0,
            worker={"cpu": 1, "bw_gbps": 2.0},
            ps={"cpu": 1, "bw_gbps": 4.0},
            chunks=16,
        ),
        [
            Placement.of({0: 2}, {1: 1}),
            Placement.of({0: 4, 1: 4}, {2: 1}),  # PS bottleneck: factor 16/4 = 4
            Placement.of({0: 3, 1: 3}, {2: 2, 3: 1}),
        ],
    ),
    "ps_sync": (
        JobSpec(
            job_id="s",
            sync="sync",
            compute_s=0.01,
            gradient_mb=100.0,
            worker={"cpu": 1},
            ps={"cpu": 1},
            global_batch=64,
            batch_size=1,
            chunks=16,
        ),
        [
            Placement.of({0: 2}, {0: 1}),  # co-located: internal rate
            Placement.of({1: 4}, {1: 2}),
            Placement.of({0: 2, 1: 2}, {0: 1}),  # external: 10 Gbit/s
            Placement.of({0: 1, 2: 3}, {3: 2}),  # external: 4 Gbit/s
            Placement.of({2: 8}, {3: 1}),
        ],
    ),
    "ring": (
        JobSpec(
            job_id="r",
            arch="allreduce",
            compute_s=0.2,
            update_s=0.05,
            gradient_mb=100.0,
            chunks=16,
        ),
        [
            Placement.of({0: 1}),
            Placement.of({0: 4}),  # b_eff = 100 (intra)
            Placement.of({0: 1, 1: 1}),  # b_eff = 10
            Placement.of({0: 2, 2: 2}),  # b_eff = 4
            Placement.of({2: 3, 3: 3}),  # b_eff = 25
        ],
    ),
    "hetero": (
        JobSpec(
            job_id="h",
            arch="allreduce",
            compute_s=0.3,
            update_s=0.05,
            gradient_mb=50.0,
            worker_types={"fast": {"cpu": 4, "bw_gbps": 2.0}},
            compute_s_by_type={"fast": 0.25},
            chunks=16,
        ),
        [
            Placement.of({0: 1}, worker_type="fast"),
            Placement.of({0: 4}, worker_type="fast"),  # q = 1, share 3/4
            Placement.of({0: 1, 1: 1}, worker_type="fast"),  # q = 0, share 1/2
            Placement.of({0: 3, 2: 3}, worker_type="fast"),  # share 5/6
        ],
    ),
    "dps": (
        JobSpec(
            job_id="d",
            sync="sync",
            compute_s=0.3,
            update_s=0.2,
            gradient_mb=50.0,
            worker={"cpu": 1, "bw_gbps": 2.0},
            ps={"cpu": 1, "bw_gbps": 4.0},
            global_batch=64,
            batch_size=8,
            chunks=16,
        ),
        [
            Placement.of({0: 8}, {0: 1}),  # q = 1, u = 1
            Placement.of({0: 2}, {1: 1}),  # u = 4, b = min(2, 4/2) = 2
            Placement.of({0: 4, 1: 4}, {2: 1}),  # u = 1, b = min(2, 4/8) = 0.5
            Placement.of({2: 4}, {3: 1}),  # u = 2, b = 1
        ],
    ),
}
TRUTH_SCALE = {
    "ps_async": [2.0, 1.5],
    "ps_sync": [2.0, 3.0, 1.5],
    "ring": [2.0, 1.5, 3.0],
    "hetero": [2.0, 4.0, 1.5],
    "dps": [2.0, 2.0, 0.7],
}


def rows(
    fam: PerfFamily, job: JobSpec, placements: list[Placement], repeats: int = 1
) -> np.ndarray:
    dcs, dms = [], []
    for _ in range(repeats):
        for p in placements:
            dc, dm = fam.design(job, p, CL)
            dcs.append(dc)
            dms.append(dm)
    return np.vstack(dcs + dms)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_known_params_from_noisy_samples(name: str, seed: int) -> None:
    fam = FAMILIES[name]()
    job, placements = CONFIGS[name]
    prior = fam.prior(job, placements[0].worker_type, CL)
    truth = prior * np.array(TRUTH_SCALE[name])
    design = rows(fam, job, placements, repeats=30)
    rng = np.random.default_rng(seed)
    clean = design @ truth
    target = clean * (1 + 0.02 * rng.standard_normal(len(clean)))  # ~2% noise
    result = fit_linear(design, target, prior, fam.param_names)
    assert result.ok and result.message == ""
    assert result.pinned == ()
    assert result.n_samples == len(target)
    np.testing.assert_allclose(result.params, truth, rtol=0.05)
    # The residuals are the noise the fit could not explain: about 2% of the targets.
    assert result.residuals.shape == target.shape
    assert result.rmse < 0.03 * np.sqrt(np.mean(clean**2))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_noiseless_fit_is_exact(name: str) -> None:
    fam = FAMILIES[name]()
    job, placements = CONFIGS[name]
    prior = fam.prior(job, placements[0].worker_type, CL)
    truth = prior * np.array(TRUTH_SCALE[name])
    design = rows(fam, job, placements)
    result = fit_linear(design, design @ truth, prior, fam.param_names)
    np.testing.assert_allclose(result.params, truth, rtol=1e-8)
    assert len(result.residuals) == 2 * len(placements)
    assert np.abs(result.residuals).max() < 1e-10
    assert result.rmse < 1e-10


def test_only_colocated_samples_pin_the_external_scale() -> None:
    fam = FAMILIES["ps_sync"]()
    job, _ = CONFIGS["ps_sync"]
    local = [
        Placement.of({0: 2}, {0: 1}),
        Placement.of({1: 4}, {1: 2}),
        Placement.of({2: 8}, {2: 1}),
    ]
    prior = np.array([0.01, 1.0, 1.0])
    truth = np.array([0.02, 3.0, 1.7])
    design = rows(fam, job, local)
    result = fit_linear(design, design @ truth, prior, fam.param_names)
    assert result.ok
    assert result.pinned == ("comm_scale_ext",)
    assert result.params[2] == prior[2]  # stays exactly at the prior
    np.testing.assert_allclose(result.params[:2], truth[:2], rtol=1e-8)


def test_single_bandwidth_ring_pins_reduction_not_comm_scale() -> None:
    """(w-1)/w and (w-1)/w * 2D/b are proportional when b is the same everywhere."""
    fam = FAMILIES["ring"]()
    job, _ = CONFIGS["ring"]
    cross = [Placement.of({0: 1, 1: 1}), Placement.of({0: 2, 1: 2}), Placement.of({0: 4, 1: 4})]
    prior = fam.prior(job, None, CL)  # (0.2, 1.0, 0.05)
    truth = np.array([0.3, 1.5, 0.05])
    design = rows(fam, job, cross)
    result = fit_linear(design, design @ truth, prior, fam.param_names)
    assert result.pinned == ("reduce_s",)
    np.testing.assert_allclose(result.params, truth, rtol=1e-8)


def test_unused_column_is_pinned() -> None:
    # Async PS compute rows only: no communication sample -> comm_scale pinned.
    design = np.array([[1.0, 0.0], [1.0, 0.0]])
    result = fit_linear(
        design, np.array([0.3, 0.5]), np.array([0.1, 1.2]), ("compute_s", "comm_scale")
    )
    assert result.ok
    assert result.pinned == ("comm_scale",)
    assert result.params == pytest.approx([0.4, 1.2])  # mean of 0.3 and 0.5; prior kept
    assert result.residuals == pytest.approx([0.1, -0.1])  # 0.4 - 0.3, 0.4 - 0.5


def test_collinear_column_is_pinned_and_the_rest_absorbs_it() -> None:
    # Hetero PS without a global batch: compute row (1, 1, 0), v and U cannot be told apart.
    design = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 0.8], [1.0, 1.0, 0.0], [0.0, 0.0, 0.4]])
    target = np.array([0.7, 1.2, 0.7, 0.6])
    prior = np.array([0.3, 0.05, 1.0])
    result = fit_linear(design, target, prior, ("compute_s", "update_s", "comm_scale"))
    assert result.pinned == ("update_s",)
    # compute_s = 0.7 - U(prior 0.05) = 0.65; comm_scale = 1.2 / 0.8 = 1.5
    assert result.params == pytest.approx([0.65, 0.05, 1.5])


def test_params_are_non_negative() -> None:
    # The least-squares optimum has a negative intercept; the bound holds it at 0.
    design = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    target = np.array([0.5, 1.5, 2.5])  # = -0.5 + 1.0 * x
    result = fit_linear(design, target, np.array([1.0, 1.0]), ("a", "b"))
    assert result.ok
    assert result.params[0] == pytest.approx(0.0, abs=1e-12)
    assert result.params[1] > 0
    # Bounded optimum for a = 0: b = (0.5*1 + 1.5*2 + 2.5*3) / (1 + 4 + 9) = 11 / 14
    assert result.params[1] == pytest.approx(11 / 14)


def test_no_samples_keeps_prior() -> None:
    prior = np.array([0.2, 1.0])
    result = fit_linear(np.zeros((0, 2)), np.zeros(0), prior, ("a", "b"))
    assert not result.ok and result.message == "no samples"
    assert result.params == pytest.approx(prior)
    assert result.pinned == ("a", "b")
    assert result.residuals.size == 0 and result.rmse == 0.0
    assert result.params is not prior  # a copy: the caller's prior is never aliased


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_samples_fail_and_keep_prior(bad: float) -> None:
    prior = np.array([0.2, 1.0])
    design = np.array([[1.0, 0.0], [0.0, 0.5], [1.0, 0.0]])
    target = np.array([0.3, bad, 0.3])
    result = fit_linear(design, target, prior, ("a", "b"))
    assert not result.ok
    assert "non-finite" in result.message
    np.testing.assert_array_equal(result.params, prior)
    assert len(result.residuals) == 3
    bad_design = design.copy()
    bad_design[0, 0] = bad
    result2 = fit_linear(bad_design, np.array([0.3, 0.5, 0.3]), prior, ("a", "b"))
    assert not result2.ok
    np.testing.assert_array_equal(result2.params, prior)


def test_solver_failure_keeps_prior(monkeypatch: pytest.MonkeyPatch) -> None:
    class Failed:
        success = False
        message = "boom"
        x = np.array([9.0, 9.0])

    monkeypatch.setattr(fit_module, "_lsq_linear", lambda *a, **k: Failed())
    prior = np.array([0.2, 1.0])
    design = np.array([[1.0, 0.0], [0.0, 0.5]])
    target = np.array([0.3, -0.6])  # b < 0 unconstrained: the bounded solver is needed
    result = fit_linear(design, target, prior, ("a", "b"))
    assert not result.ok and "boom" in result.message
    np.testing.assert_array_equal(result.params, prior)
    # Residuals are those of the prior: (0.2 - 0.3, 0.5 - (-0.6))
    assert result.residuals == pytest.approx([-0.1, 1.1])


def test_solver_exception_keeps_prior(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: object, **kwargs: object) -> FitResult:
        raise np.linalg.LinAlgError("singular")

    monkeypatch.setattr(fit_module, "_lsq_linear", explode)
    prior = np.array([0.2, 1.0])
    result = fit_linear(np.eye(2), np.array([0.3, -0.6]), prior, ("a", "b"))
    assert not result.ok and "singular" in result.message
    np.testing.assert_array_equal(result.params, prior)


@pytest.mark.parametrize("seed", range(8))
def test_fit_matches_the_bounded_solver(seed: int) -> None:
    """The unconstrained shortcut returns what the bounded solver does, whether the
    unconstrained optimum is feasible (shortcut taken) or has a negative part (solver)."""
    from scipy.optimize import lsq_linear

    rng = np.random.default_rng(seed)
    design = rng.uniform(0.1, 2.0, size=(12, 3))
    truth = np.array([0.5, 1.5, -0.4 if seed % 2 else 0.4])
    target = design @ truth + rng.normal(0, 0.01, size=12)
    result = fit_linear(design, target, np.ones(3), ("a", "b", "c"))
    expected = lsq_linear(design, target, bounds=(0.0, np.inf), method="bvls").x
    assert result.ok
    np.testing.assert_allclose(result.params, expected, rtol=1e-7, atol=1e-9)
