"""What a machine offers the controller: CPUs, memory, NIC speed and GPUs.

Discovered values (psutil, NVML) are overridden by declared ones, so a CPU box can stand in
for a GPU server (``--gpus 4 --gpu-type V100``: four stand-in GPUs, ``real_gpus=False``).
Where NVML is absent (``NVMLError_LibraryNotFound``) the machine simply has no real GPUs.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

import psutil

from mlsched.agent.gpus import Device, nvml_devices, select
from mlsched.core.errors import SpecError
from mlsched.net.auth import is_loopback
from mlsched.net.ports import DEFAULT_PORTS
from mlsched.trainers.telemetry import nvml

__all__ = [
    "DEFAULT_PORTS",
    "GpuInfo",
    "NodeInfo",
    "advertised_host",
    "discover",
    "gpu_type_of",
    "interface_of",
    "is_virtual_interface",
    "link_gbps",
]

# Virtual interfaces report nominal speeds (veth: 10 Gb/s) that say nothing about the wire.
_VIRTUAL_PREFIXES = ("lo", "docker", "veth", "br-", "virbr", "cni", "flannel", "cali")


@dataclass(frozen=True)
class GpuInfo:
    """One of the agent's GPUs (the controller's position i is the i-th of them)."""

    index: int  # NVML index (a MIG instance: its GPU's); a stand-in's position
    type: str  # the model, e.g. V100 (the agent's --gpu-type for a stand-in)
    memory_bytes: int = 0
    uuid: str = ""  # GPU-... or MIG-... ("" for a stand-in)
    name: str = ""  # NVML's full name

    @property
    def visible_as(self) -> str:
        """What a task's ``CUDA_VISIBLE_DEVICES`` names it by: its UUID, else its index."""
        return self.uuid or str(self.index)


@dataclass(frozen=True)
class NodeInfo:
    """This machine as it registers: resources, GPUs, pool and addresses."""

    name: str
    host: str
    cpus: float
    mem_gb: float
    nic_gbps: float  # 0: unknown (the controller uses its default)
    gpus: tuple[GpuInfo, ...] = ()
    gpu_type: str = ""
    real_gpus: bool = False
    pool: str = "both"
    rack: str = ""
    ports: tuple[int, int] = DEFAULT_PORTS
    checkpoint_root: str = ""
    version: str = ""

    def resources(self) -> dict[str, float]:
        amounts = {"gpu": float(len(self.gpus)), "cpu": self.cpus, "mem_gb": self.mem_gb}
        if self.nic_gbps > 0:  # unknown bandwidth is left to the controller's default
            amounts["bw_gbps"] = self.nic_gbps
        return amounts


def gpu_type_of(name: str) -> str:
    """A short type from an NVML name: 'Tesla V100-SXM2-16GB' -> 'V100'."""
    text = re.sub(r"\b(NVIDIA|Tesla|GeForce|Quadro)\b", " ", name).strip()
    match = re.search(r"\b([A-Z]{1,3}\d{1,4}[A-Za-z]?)\b", text)
    if match:
        return match.group(1)
    words = text.split()
    return "".join(words[:2]) if words else name.strip()


def is_virtual_interface(name: str) -> bool:
    """Loopback, container and bridge interfaces (their traffic also crosses a real NIC, or
    never leaves the machine)."""
    return name.startswith(_VIRTUAL_PREFIXES)


def link_gbps() -> float:
    """The fastest up, physical-looking interface in Gb/s (0 when no speed is known)."""
    try:
        stats = psutil.net_if_stats()
    except OSError:
        return 0.0
    speeds = [
        st.speed
        for name, st in stats.items()
        if st.isup and st.speed > 0 and not is_virtual_interface(name)
    ]
    return max(speeds, default=0) / 1000.0


def _route_address(controller_host: str) -> str | None:
    """The local address the kernel would use to reach the controller (no packet is sent)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((controller_host, 9))
        return str(s.getsockname()[0])
    return None


def advertised_host(name: str, controller: str) -> str:
    """The address peers use to reach this machine's tasks.

    Loopback when the controller is on loopback (a one-machine cluster); otherwise the
    machine name's address, unless that is a loopback alias (Debian maps the host name to
    127.0.1.1), in which case the address of the route to the controller.
    """
    host = controller.rpartition(":")[0] or controller
    if is_loopback(host):
        return "127.0.0.1"
    with contextlib.suppress(OSError, ValueError):
        addr = socket.gethostbyname(name)
        if not ipaddress.ip_address(addr).is_loopback:
            return addr
    return _route_address(host.strip("[]")) or name


def interface_of(host: str) -> str | None:
    """The network interface holding ``host``'s address (None when none here does): what
    ``GLOO_SOCKET_IFNAME`` names so that a task's Gloo sockets bind that address only."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host.strip("[]"), None)}
        interfaces = psutil.net_if_addrs()
    except (OSError, UnicodeError):
        return None
    for name, addrs in interfaces.items():
        if any(a.address.split("%")[0] in addresses for a in addrs):
            return name
    return None


def _version() -> str:
    try:
        return metadata.version("mlsched")
    except metadata.PackageNotFoundError:
        return ""


def _devices() -> list[Device]:
    """The machine's devices as NVML lists them (none without NVML)."""
    nv = nvml()
    if nv is None:
        return []
    try:
        return nvml_devices(nv)
    except Exception:  # a driver that fails while listing: no usable GPUs
        return []


def _one_model(chosen: Sequence[GpuInfo]) -> str:
    """The model of ``chosen`` GPUs; a SpecError when they are of several (the controller
    plans with one GPU type per agent)."""
    models = sorted({g.type for g in chosen})
    if len(models) > 1:
        by_model = "; ".join(
            f"{m}: {','.join(str(g.index) for g in chosen if g.type == m)}" for m in models
        )
        raise SpecError(
            "--gpus", f"GPUs of {len(models)} models ({by_model})",
            "GPUs of one model: run one agent per model (--gpus with its indices, or "
            "--gpu-uuids), or declare --gpu-type",
        )  # fmt: skip
    return models[0] if models else ""


def discover(
    *,
    controller: str = "127.0.0.1:0",
    name: str | None = None,
    host: str | None = None,
    gpus: int | tuple[int, ...] | None = None,
    gpu_uuids: Sequence[str] = (),
    gpu_type: str | None = None,
    cpus: float | None = None,
    mem_gb: float | None = None,
    nic_gbps: float | None = None,
    pool: str = "both",
    rack: str = "",
    ports: tuple[int, int] = DEFAULT_PORTS,
    checkpoint_root: str = "",
    use_nvml: bool = True,
    inherited: str | None = None,
) -> NodeInfo:
    """This machine's resources; every keyword given overrides what was discovered.

    GPUs (:mod:`mlsched.agent.gpus`): all NVML lists, those at ``gpus`` (a count, or NVML
    indices) or with ``gpu_uuids``, among those the inherited ``CUDA_VISIBLE_DEVICES``
    leaves (``inherited``: the agent command passes its own). A count larger than there are GPUs
    declares stand-ins (a CPU machine playing a GPU server)."""
    name = name or socket.gethostname()
    devices = _devices() if use_nvml else []
    if isinstance(gpus, int) and not gpu_uuids and gpus > len(select(devices, inherited=inherited)):
        # More GPUs declared than this machine shows: all of them are stand-ins.
        chosen = tuple(GpuInfo(i, gpu_type or "") for i in range(gpus))
        real_gpus = False
    else:
        picked = select(devices, gpus=gpus, uuids=gpu_uuids, inherited=inherited)
        chosen = tuple(
            GpuInfo(d.index, gpu_type or gpu_type_of(d.name), d.memory_bytes, d.uuid, d.name)
            for d in picked
        )
        real_gpus = bool(chosen)
    kind = gpu_type or _one_model(chosen)
    return NodeInfo(
        name=name,
        host=host or advertised_host(name, controller),
        cpus=float(cpus if cpus is not None else psutil.cpu_count(logical=True) or 1),
        mem_gb=float(
            mem_gb if mem_gb is not None else round(psutil.virtual_memory().total / 2**30, 1)
        ),
        nic_gbps=float(nic_gbps if nic_gbps is not None else link_gbps()),
        gpus=chosen,
        gpu_type=kind,
        real_gpus=real_gpus,
        pool=pool,
        rack=rack,
        ports=ports,
        checkpoint_root=checkpoint_root,
        version=_version(),
    )
