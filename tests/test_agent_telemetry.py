"""The agent's node telemetry: NIC counters (psutil) and NVML GPU counters, absent when not
given. NVML is absent on most test machines; a stand-in for the pynvml module plays a GPU
that answers some queries and not others."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace
from typing import Any

import psutil
import pynvml
import pytest

from mlsched.agent.discovery import interface_of, is_virtual_interface
from mlsched.agent.serde import telemetry_to_proto
from mlsched.agent.telemetry import NodeTelemetry
from mlsched.trainers.telemetry import gpu_inventory


def sampled(tel: NodeTelemetry) -> Any:
    """A sample as it goes on the wire (absent counters must stay absent there)."""
    return telemetry_to_proto(tel.sample())


def _send_over_loopback(n: int) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def drain() -> None:
            conn, _ = server.accept()
            with conn:
                while conn.recv(1 << 16):
                    pass

        reader = threading.Thread(target=drain)
        reader.start()
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"x" * n)
        reader.join(10)


def test_nic_counters_of_the_agents_interface_and_no_nvml_fields_without_nvml() -> None:
    lo = interface_of("127.0.0.1")  # an agent whose --host is loopback (one-machine cluster)
    assert lo is not None
    tel = NodeTelemetry(interface=lo)
    first = sampled(tel)
    _send_over_loopback(2_000_000)
    second = sampled(tel)
    assert second.net_interface == lo
    assert second.HasField("net_sent_bytes") and second.HasField("net_recv_bytes")
    assert second.net_sent_bytes - first.net_sent_bytes >= 2_000_000
    assert second.net_recv_bytes - first.net_recv_bytes >= 2_000_000
    assert second.sampled_unix >= first.sampled_unix > 0
    if not gpu_inventory():  # this machine: no NVML library (or no GPU)
        assert not second.nvml and len(second.gpus) == 0
    # A NIC psutil has no counters for: the fields are absent, not zero.
    gone = sampled(NodeTelemetry(interface="no-such-nic0", use_nvml=False))
    assert not gone.HasField("net_sent_bytes") and not gone.HasField("net_recv_bytes")
    # No interface holds the agent's address: the physical-looking ones together.
    physical = [n for n in psutil.net_io_counters(pernic=True) if not is_virtual_interface(n)]
    total = sampled(NodeTelemetry(use_nvml=False))
    assert total.net_interface == ""
    assert total.HasField("net_sent_bytes") == bool(physical)


class _StandInGpu:
    """What pynvml answers for one GPU: utilisation and memory; PCIe and NVLink optional."""

    def __init__(self, *, pcie: bool, nvlink: bool) -> None:
        self.pcie, self.nvlink = pcie, nvlink
        self.nvlink_kib = [0, 0]

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name, fn in {
            "nvmlInit": lambda: None,
            "nvmlDeviceGetCount": lambda: 1,
            "nvmlDeviceGetHandleByIndex": lambda i: f"gpu{i}",
            "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=40, memory=5),
            "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(used=3 << 30, total=16 << 30),
            "nvmlDeviceGetPcieThroughput": self.pcie_kbps,
            "nvmlDeviceGetFieldValues": self.field_values,
        }.items():
            monkeypatch.setattr(pynvml, name, fn)

    def pcie_kbps(self, handle: Any, counter: int) -> int:
        if not self.pcie:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 1200 if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else 800

    def field_values(self, handle: Any, fields: list[tuple[int, int]]) -> Any:
        values = (pynvml.c_nvmlFieldValue_t * len(fields))()
        for v, (field_id, _scope) in zip(values, fields, strict=True):
            v.fieldId = field_id
            if not self.nvlink:
                v.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                continue
            v.nvmlReturn = pynvml.NVML_SUCCESS
            v.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            tx = field_id == pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
            v.value.ullVal = self.nvlink_kib[0 if tx else 1]
        return values


def test_a_gpu_without_pcie_or_nvlink_counters_leaves_them_absent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _StandInGpu(pcie=False, nvlink=False).install(monkeypatch)
    tel = NodeTelemetry(interface="no-such-nic0")
    for msg in (sampled(tel), sampled(tel)):
        assert msg.nvml
        (gpu,) = msg.gpus
        assert gpu.util_percent == 40 and gpu.mem_used_bytes == 3 << 30
        for name in ("pcie_tx_kbps", "pcie_rx_kbps", "nvlink_tx_kbps", "nvlink_rx_kbps"):
            assert not gpu.HasField(name), name


def test_pcie_and_nvlink_throughput_where_nvml_gives_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpu = _StandInGpu(pcie=True, nvlink=True)
    gpu.install(monkeypatch)
    tel = NodeTelemetry(interface="no-such-nic0")
    first = sampled(tel)
    (g,) = first.gpus
    assert (g.pcie_tx_kbps, g.pcie_rx_kbps) == (1200, 800)
    assert not g.HasField("nvlink_tx_kbps")  # a cumulative counter: no interval yet
    gpu.nvlink_kib = [4000, 1000]
    second = sampled(tel)
    (g,) = second.gpus
    dt = second.sampled_unix - first.sampled_unix
    assert g.nvlink_tx_kbps == pytest.approx(4000 * 1.024 / dt)
    assert g.nvlink_rx_kbps == pytest.approx(1000 * 1.024 / dt)
