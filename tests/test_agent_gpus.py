"""Which GPUs an agent takes and how its tasks see them, against a stand-in for the pynvml
module (NVML is absent here): a machine of two V100s around an A100 in MIG mode with two
instances. Also the InfiniBand counters from a stand-in sysfs tree, and the registration
the controller receives over real gRPC. A real GPU run is scripts/gpu_check.sh's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import grpc
import pynvml
import pytest
from cluster_helpers import controller

from mlsched.agent.discovery import discover
from mlsched.agent.gpus import parse_gpus
from mlsched.agent.serde import telemetry_to_proto, to_register_request
from mlsched.agent.task import task_env
from mlsched.agent.telemetry import NodeTelemetry, infiniband_counters
from mlsched.cli import main
from mlsched.core.errors import SpecError
from mlsched.net.auth import ClientAuth, client_channel
from mlsched.v1 import agent_pb2_grpc

V100 = "Tesla V100-SXM2-16GB"
A100 = "NVIDIA A100-SXM4-40GB"
GB = 1 << 30


class _Machine:
    """pynvml's answers for GPU 0 (V100, GPU-aaa), GPU 1 (A100 in MIG mode: instances in
    slots 0 and 2, slot 1 empty) and GPU 2 (V100, GPU-ccc)."""

    gpus: ClassVar = {0: ("GPU-aaa", V100, 16), 1: ("GPU-bbb", A100, 40), 2: ("GPU-ccc", V100, 16)}
    migs: ClassVar = {(1, 0): ("MIG-b1", 10), (1, 2): ("MIG-b2", 20)}

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def handle_of_uuid(uuid: str) -> Any:
            for i, (u, _, _) in self.gpus.items():
                if u == uuid:
                    return ("gpu", i)
            for key, (u, _) in self.migs.items():
                if u == uuid:
                    return ("mig", key)
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

        for name, fn in {
            "nvmlInit": lambda: None,
            "nvmlDeviceGetCount": lambda: len(self.gpus),
            "nvmlDeviceGetHandleByIndex": lambda i: ("gpu", i),
            "nvmlDeviceGetHandleByUUID": handle_of_uuid,
            "nvmlDeviceGetName": self.name,
            "nvmlDeviceGetUUID": self.uuid,
            "nvmlDeviceGetMemoryInfo": self.memory,
            "nvmlDeviceGetMigMode": lambda h: (1, 1) if h == ("gpu", 1) else (0, 0),
            "nvmlDeviceGetMaxMigDeviceCount": lambda h: 3,
            "nvmlDeviceGetMigDeviceHandleByIndex": self.mig,
            "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=55, memory=7),
            "nvmlDeviceGetPowerUsage": lambda h: 212_500,  # milliwatts
        }.items():
            monkeypatch.setattr(pynvml, name, fn)

    def name(self, h: Any) -> str:
        return self.gpus[h[1]][1] if h[0] == "gpu" else f"{A100} MIG 1g.10gb"

    def uuid(self, h: Any) -> str:
        return self.gpus[h[1]][0] if h[0] == "gpu" else self.migs[h[1]][0]

    def memory(self, h: Any) -> Any:
        gb = self.gpus[h[1]][2] if h[0] == "gpu" else self.migs[h[1]][1]
        return SimpleNamespace(total=gb * GB, used=GB)

    def mig(self, h: Any, j: int) -> Any:
        if (h[1], j) not in self.migs:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return ("mig", (h[1], j))


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> _Machine:
    m = _Machine()
    m.install(monkeypatch)
    return m


def _node(**kw: Any) -> Any:
    return discover(controller="127.0.0.1:7000", name="n", cpus=4, mem_gb=8, nic_gbps=10, **kw)


def test_gpus_by_index_uuid_or_count_with_model_memory_and_uuid(machine: _Machine) -> None:
    node = _node(gpus=(0, 2))
    assert [(g.index, g.uuid, g.type, g.memory_bytes) for g in node.gpus] == [
        (0, "GPU-aaa", "V100", 16 * GB), (2, "GPU-ccc", "V100", 16 * GB),
    ]  # fmt: skip
    assert node.real_gpus and node.gpu_type == "V100" and node.resources()["gpu"] == 2
    mig = _node(gpu_uuids=["MIG-b2"])
    (g,) = mig.gpus
    assert (g.uuid, g.type, g.memory_bytes, g.index) == ("MIG-b2", "A100", 20 * GB, 1)
    assert [g.uuid for g in _node(gpus=1).gpus] == ["GPU-aaa"]
    stand_ins = _node(gpus=8, gpu_type="K80")  # more than there are: a CPU box's stand-ins
    assert not stand_ins.real_gpus and len(stand_ins.gpus) == 8


def test_a_mixed_machine_or_a_missing_device_is_refused_by_flag(machine: _Machine) -> None:
    with pytest.raises(SpecError, match=r"V100: 0,2") as info:
        _node()  # every device: two models (the A100's MIG instances, the V100s)
    assert info.value.field == "--gpus"
    assert len(_node(gpu_type="V100").gpus) == 4  # a declared type is the operator's word
    with pytest.raises(SpecError) as info:
        _node(gpus=(1,))  # in MIG mode: only its instances can be used
    assert info.value.field == "--gpus" and "0, 2" in str(info.value)
    with pytest.raises(SpecError, match="MIG-b1") as info:
        _node(gpu_uuids=["GPU-zzz"])
    assert info.value.field == "--gpu-uuids"
    for text in ("0,x", "1,1", "-1", "2,"):
        with pytest.raises(SpecError):
            parse_gpus(text)
    assert parse_gpus("3") == 3 and parse_gpus("0,2") == (0, 2) and parse_gpus(None) is None


def test_an_inherited_cuda_visible_devices_bounds_what_the_agent_takes(machine: _Machine) -> None:
    assert [g.uuid for g in _node(inherited="GPU-ccc").gpus] == ["GPU-ccc"]
    assert [g.uuid for g in _node(inherited="2,0").gpus] == ["GPU-ccc", "GPU-aaa"]
    assert [g.uuid for g in _node(inherited="GPU-c").gpus] == ["GPU-ccc"]  # a unique prefix
    assert [g.uuid for g in _node(inherited="MIG-b1,MIG-b2").gpus] == ["MIG-b1", "MIG-b2"]
    assert _node(inherited="").gpus == () and not _node(inherited="").real_gpus
    assert [g.uuid for g in _node(inherited="0,7,2").gpus] == ["GPU-aaa"]  # CUDA stops at 7
    with pytest.raises(SpecError, match="CUDA_VISIBLE_DEVICES") as info:
        _node(gpus=(0,), inherited="GPU-ccc")
    assert info.value.field == "--gpus"


def test_a_tasks_environment_names_its_devices_by_uuid_in_pci_order() -> None:
    devices = ("GPU-aaa", "MIG-b2", "GPU-ccc")
    env = task_env({"PATH": "/bin"}, 2, "eth1", True, devices, [2, 0])
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-ccc,GPU-aaa"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and env["OMP_NUM_THREADS"] == "2"
    assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"] == "eth1"
    kept = task_env({"NCCL_SOCKET_IFNAME": "ib0"}, 1, "eth1", True, devices, [1])
    assert kept["NCCL_SOCKET_IFNAME"] == "ib0" and kept["CUDA_VISIBLE_DEVICES"] == "MIG-b2"
    cpu = task_env({"CUDA_VISIBLE_DEVICES": "GPU-aaa"}, 1, None, False, devices, [])
    assert "NCCL_SOCKET_IFNAME" not in cpu and "CUDA_DEVICE_ORDER" not in cpu
    with pytest.raises(IndexError):
        task_env({}, 1, None, True, devices, [3])


def test_telemetry_samples_the_agents_own_devices_with_power_and_memory(
    machine: _Machine, tmp_path: Path
) -> None:
    tel = NodeTelemetry(interface="no-such-nic0", devices=[(2, "GPU-ccc"), (1, "MIG-b1")],
                        ib_root=tmp_path)  # fmt: skip
    msg = telemetry_to_proto(tel.sample())
    assert [(g.index, g.uuid) for g in msg.gpus] == [(2, "GPU-ccc"), (1, "MIG-b1")]
    first = msg.gpus[0]
    assert first.power_w == 212.5 and first.util_percent == 55
    assert first.mem_total_bytes == 16 * GB and msg.gpus[1].mem_total_bytes == 10 * GB
    assert not msg.HasField("ib_sent_bytes")  # no RDMA device under this root


def test_infiniband_port_counters_are_read_in_bytes(tmp_path: Path) -> None:
    assert infiniband_counters(tmp_path) is None
    for dev, port, tx, rx in (("mlx5_0", 1, 100, 50), ("mlx5_1", 1, 10, 5)):
        counters = tmp_path / dev / "ports" / str(port) / "counters"
        counters.mkdir(parents=True)
        (counters / "port_xmit_data").write_text(f"{tx}\n")
        (counters / "port_rcv_data").write_text(f"{rx}\n")
    assert infiniband_counters(tmp_path) == (440.0, 220.0)  # 4-byte words
    (tmp_path / "mlx5_1" / "ports" / "1" / "counters" / "port_rcv_data").write_text("n/a")
    assert infiniband_counters(tmp_path) == (400.0, 200.0)  # an unreadable port is left out
    tel = NodeTelemetry(use_nvml=False, interface="no-such-nic0", ib_root=tmp_path)
    msg = telemetry_to_proto(tel.sample())
    assert (msg.ib_sent_bytes, msg.ib_recv_bytes) == (400.0, 200.0)


def test_the_controller_receives_each_gpus_model_memory_and_uuid(
    machine: _Machine, tmp_path: Path
) -> None:
    ctl = controller(tmp_path)
    try:
        node = discover(controller=ctl.address, name="gpu-a", host="127.0.0.1", gpus=(0, 2))
        stub = agent_pb2_grpc.AgentServiceStub(client_channel(ctl.address, ClientAuth()))
        stub.Register(to_register_request(node), timeout=10)
        agent = ctl.agents.get("gpu-a")
        assert agent is not None and agent.gpu_type == "V100" and agent.gpu_count == 2
        assert [(g["uuid"], g["model"], g["memory_bytes"]) for g in agent.gpus] == [
            ("GPU-aaa", "V100", 16 * GB), ("GPU-ccc", "V100", 16 * GB),
        ]  # fmt: skip
        bad = to_register_request(node)
        bad.gpus[0].uuid = "GPU-\x00"
        with pytest.raises(grpc.RpcError) as info:
            stub.Register(bad, timeout=10)
        assert "gpus[0].uuid" in (info.value.details() or "")
    finally:
        ctl.stop()


def test_the_agent_command_names_a_bad_gpu_flag(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["agent", "--controller", "127.0.0.1:1", "--gpus", "0,x"]
    assert main(argv) == 2
    assert "--gpus" in capsys.readouterr().err
