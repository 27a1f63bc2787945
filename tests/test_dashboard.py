"""``deploy/grafana/mlsched.json`` charts what the controller really exports: a controller with
``--metrics-listen``, a real agent training one job, and a GPU machine's heartbeats over real
gRPC (NVML is absent here: the message an agent with NVML sends, GPUs, power, NVLink and
InfiniBand counters included); every panel query's metric names are in the scrape."""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from pathlib import Path

import pytest
import yaml
from cluster_helpers import agents, controller, mlp_job, wait_for
from prometheus_client.parser import text_string_to_metric_families

from mlsched.cli import main
from mlsched.net.auth import ClientAuth, client_channel
from mlsched.v1 import agent_pb2, agent_pb2_grpc, common_pb2

pytestmark = pytest.mark.processes  # an agent training a job: one such test at a time

DASHBOARD = Path(__file__).resolve().parent.parent / "deploy" / "grafana" / "mlsched.json"
# PromQL words that are not metric names.
_PROMQL = {"sum", "by", "rate", "max", "histogram_quantile", "le", "call", "label_values", "agent"}


def _scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def _metric_names(expr: str) -> set[str]:
    without_labels = re.sub(r"\{[^}]*\}", "", expr)
    without_ranges = re.sub(r"\[[^\]]*\]", "", without_labels)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_ranges))
    unknown = words - _PROMQL - {w for w in words if w.startswith("mlsched_")}
    assert not unknown, f"{expr}: {sorted(unknown)} are neither PromQL nor mlsched metrics"
    return {w for w in words if w.startswith("mlsched_")}


_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_LABEL_VALUES = re.compile(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_]\w*)\s*\)")


def _label_uses(expr: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The (metric, label) pairs of ``expr``'s selectors and ``label_values`` and the
    labels its ``by`` clauses group on."""
    selected = [
        (metric, label)
        for metric, body in _SELECTOR.findall(expr)
        for label in _MATCHER.findall(body)
    ] + _LABEL_VALUES.findall(expr)
    grouped = [w.strip() for body in _BY.findall(expr) for w in body.split(",") if w.strip()]
    return selected, grouped


def _labels_of(scraped: dict[str, list[tuple[dict[str, str], float]]], name: str) -> set[str]:
    return {k for labels, _ in scraped.get(name, []) for k in labels}


def _gpu_heartbeats(address: str, stop: threading.Event) -> None:
    """Register ``gpu-m`` (no GPU capacity: no task is placed on it) and heartbeat the
    telemetry of two V100s until ``stop``."""
    stub = agent_pb2_grpc.AgentServiceStub(client_channel(address, ClientAuth()))
    gpus = [common_pb2.Gpu(index=i, type="V100", memory_bytes=16 << 30, uuid=f"GPU-{i}")
            for i in (0, 2)]  # fmt: skip
    stub.Register(agent_pb2.RegisterRequest(
        name="gpu-m", host="127.0.0.1", capacity=common_pb2.Resources(amounts={"cpu": 1.0}),
        gpus=gpus, pool="worker", real_gpus=True,
    ), timeout=10)  # fmt: skip
    sent = 0.0
    while not stop.is_set():
        sent += 1e6
        telemetry = agent_pb2.Telemetry(
            cpu_percent=12.5, mem_used_bytes=3 << 30, net_sent_bytes=sent, net_recv_bytes=sent,
            nvml=True, net_interface="eth0", ib_sent_bytes=4 * sent, ib_recv_bytes=2 * sent,
            gpus=[agent_pb2.GpuTelemetry(
                index=g.index, uuid=g.uuid, util_percent=80.0, mem_used_bytes=4 << 30,
                mem_total_bytes=16 << 30, power_w=250.0, pcie_tx_kbps=1000.0,
                pcie_rx_kbps=500.0, nvlink_tx_kbps=2e6, nvlink_rx_kbps=2e6,
            ) for g in gpus],
        )  # fmt: skip
        stub.Heartbeat(agent_pb2.HeartbeatRequest(agent_id="gpu-m", telemetry=telemetry),
                       timeout=10)  # fmt: skip
        stop.wait(0.3)


def test_every_panel_queries_metrics_a_running_controller_exports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    targets = [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p["targets"]]
    assert len(dashboard["panels"]) >= 12 and all(expr for _, expr in targets)
    # Two agents before the first plan: with one, the engine could start on gpu-m alone (no
    # GPU) and rightly refuse a GPU job submitted before agent0 registers.
    ctl = controller(tmp_path, metrics_listen="127.0.0.1:0", slot_seconds=3.0, min_agents=2)
    stop = threading.Event()
    beats = threading.Thread(target=_gpu_heartbeats, args=(ctl.address, stop), daemon=True)
    try:
        beats.start()
        with agents(ctl.address, tmp_path, 1):
            ctl.submit(yaml.safe_dump([mlp_job("long", units=100_000)]))
            try:
                wait_for(lambda: ctl.job("long").measured_iteration_s > 0, 90, "a measurement")
            except AssertionError:
                agents_seen = [(a.agent_id, a.alive, a.capacity) for a in ctl.agents.all()]
                log = (tmp_path / "agent0.log").read_text(errors="replace")[-3000:]
                raise AssertionError(f"{ctl.job('long')}\n{agents_seen}\n{log}") from None
            assert ctl.metrics is not None
            scraped = _scrape(ctl.metrics.port)
            # mlsched status shows the same GPU readings, per agent.
            assert main(["status", "--controller", ctl.address]) == 0
            out = capsys.readouterr().out
            assert "gpu 2 V100 GPU-2: 80% util, 4.0 / 16.0 GiB, 250 W" in out
        # Every query's metric names (histograms by their _bucket series, counters by _total).
        for title, expr in targets:
            for name in _metric_names(expr):
                assert name in scraped, f"panel {title!r} queries {name}, not exported"
        for var in dashboard["templating"]["list"]:
            for name in _metric_names(var.get("definition", "")):
                assert name in scraped, f"variable {var['name']} reads {name}"
        # Every label a query selects or groups by is on the series it names: a selector on
        # a label the series lacks matches nothing, and the panel stays empty.
        for title, expr in [*targets, *((v["name"], v.get("definition", "")) for v in
                                        dashboard["templating"]["list"])]:  # fmt: skip
            selected, grouped = _label_uses(expr)
            for metric, label in selected:
                have = _labels_of(scraped, metric)
                assert label in have, f"{title!r} selects {metric}{{{label}}}: labels {have}"
            names = _metric_names(expr)
            for label in grouped:
                assert any(label in _labels_of(scraped, n) for n in names), (
                    f"{title!r} groups by {label!r}, a label none of {sorted(names)} has"
                )
        # The GPU machine's telemetry, labelled by agent, index, UUID and model.
        power = {(s["agent"], s["uuid"], s["model"]): v
                 for s, v in scraped["mlsched_gpu_power_watts"]}  # fmt: skip
        assert power == {("gpu-m", "GPU-0", "V100"): 250.0, ("gpu-m", "GPU-2", "V100"): 250.0}
        nvlink = scraped["mlsched_gpu_nvlink_tx_bytes_per_second"][0][1]
        assert nvlink == pytest.approx(2e9)  # KB/s on the wire, bytes/s exported
        (ib,) = scraped["mlsched_agent_infiniband_sent_bytes_total"]
        assert ib[0] == {"agent": "gpu-m"} and ib[1] > 0
        gpus = {s["state"]: v for s, v in scraped["mlsched_gpus"]}
        assert gpus["allocated"] >= 1 and gpus["allocated"] + gpus["idle"] == 2  # agent0's two
        (speed,) = scraped["mlsched_job_iterations_per_second"]
        assert speed[0] == {"job": "long"} and speed[1] > 0
        # A stand-in GPU agent (no NVML) exports no GPU series: absent, never zero.
        assert {s["agent"] for s, _ in scraped["mlsched_gpu_utilization_percent"]} == {"gpu-m"}
    finally:
        stop.set()
        beats.join(timeout=10)
        ctl.stop()
