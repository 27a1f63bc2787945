"""The experiments' run pool on a Ray cluster: a head and a worker node started on this
machine's loopback (Ray's own ``ray.cluster_utils.Cluster``, in a helper process, so that
stopping it stops only its nodes), an experiment run through ``--executor ray:ADDRESS`` as
a user runs it, and its results compared with the local pool's."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlsched.core.errors import SpecError
from mlsched.experiments.pool import Runner, executor_spec

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="Ray is not installed (the ray extra)"
)

# Set before Ray is imported: a cluster on loopback stays on 127.0.0.1.
CLUSTER = """
import os, sys
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
from ray.cluster_utils import Cluster
args = {"num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1"}
cluster = Cluster(initialize_head=True, head_node_args=args)
cluster.add_node(**args)
print(cluster.address, flush=True)
sys.stdin.read()  # until the test closes it
cluster.shutdown()
print("stopped", flush=True)
"""


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    helper = subprocess.Popen(
        [sys.executable, "-c", CLUSTER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert helper.stdout is not None and helper.stdin is not None
    address = helper.stdout.readline().strip()
    try:
        assert address.startswith("127.0.0.1:"), address
        yield address
    finally:
        helper.stdin.close()
        try:
            helper.wait(timeout=60)
        except subprocess.TimeoutExpired:
            helper.kill()


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k != "wall_seconds"}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _experiment(out: Path, executor: str) -> dict[str, Any]:
    subprocess.run(
        [sys.executable, "-m", "mlsched", "experiment", "dps", "--scale", "smoke", "--seeds",
         "2", "--no-strict", "--out", str(out), "--executor", executor],
        check=True, capture_output=True, timeout=600,
        env={**os.environ, "MLSCHED_PROGRESS": "0", "RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip
    return json.loads((out / "results.json").read_text())


@needs_ray
def test_an_experiment_on_a_ray_cluster_gives_the_local_pools_results(
    ray_address: str, tmp_path: Path
) -> None:
    local = _experiment(tmp_path / "local", "local")
    on_ray = _experiment(tmp_path / "ray", f"ray:{ray_address}")
    assert local["runs"], "the experiment made no runs"
    assert _without_timings(on_ray) == _without_timings(local)


@needs_ray
def test_ray_runs_come_back_in_item_order_and_a_failure_is_raised(ray_address: str) -> None:
    advanced: list[int] = []
    with Runner(executor=f"ray:{ray_address}") as runner:
        assert runner.workers == 2  # the head's CPU and the worker node's
        # An importable function: the workers load it by name, as they load the experiments'.
        got = runner.map(math.factorial, list(range(12)), advanced.append)
        assert got == [math.factorial(x) for x in range(12)]
        assert sum(advanced) == 12
        with pytest.raises(ValueError, match="negative"):
            runner.map(math.factorial, [1, 2, -3, 4], lambda _: None)


@pytest.mark.parametrize(
    "value", ["ray:", "ray:host", "ray:host:port", "ray:host:0", "ray:host:70000", "spark", "ray "]
)
def test_a_bad_executor_is_refused_naming_the_field(value: str) -> None:
    if value == "ray ":  # surrounding blanks are forgiven
        assert executor_spec(value) == ("ray", None)
        return
    with pytest.raises(SpecError, match="--executor"):
        executor_spec(value, "--executor")


def test_the_executor_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLSCHED_EXECUTOR", "ray:10.0.0.5:6379")
    assert executor_spec() == ("ray", "10.0.0.5:6379")
    monkeypatch.setenv("MLSCHED_EXECUTOR", "bogus")
    with pytest.raises(SpecError, match="MLSCHED_EXECUTOR"):
        Runner()
    monkeypatch.delenv("MLSCHED_EXECUTOR")
    assert executor_spec() == ("local", None)


def test_without_ray_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets without the extra
    with pytest.raises(SpecError, match=r"mlsched\[ray\]"):
        Runner(executor="ray:127.0.0.1:6379").__enter__()


def test_an_address_where_nothing_listens_is_refused_at_once() -> None:
    import socket

    with socket.socket() as probe:  # a port just freed: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(SpecError, match=f"ray:127.0.0.1:{port}"):
        Runner(executor=f"ray:127.0.0.1:{port}").__enter__()
