"""Which GPUs an agent takes, and how its tasks name them.

NVML lists the machine's GPUs in PCI bus order, each with a UUID; a GPU in MIG mode is
used through its MIG instances (each a device of its own, ``MIG-...``), never whole. The
agent takes (:func:`select`):

* every device, or the first N (``--gpus N``), or those at NVML indices (``--gpus 0,2``),
  or those with the given UUIDs (``--gpu-uuids GPU-...,MIG-...``);
* only among the devices its own ``CUDA_VISIBLE_DEVICES`` lets it use, when it inherited
  one (Slurm, a container runtime, a device plugin): indices there are read in PCI bus
  order, as NVML numbers them, and UUIDs (or unique prefixes of them) as they are.

The controller numbers an agent's GPUs 0..n-1 (positions in this list); a task's
``CUDA_VISIBLE_DEVICES`` names its positions' devices by UUID (:func:`visible_devices`),
which means the same device whatever order CUDA enumerates in, and
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes any index a task or a library uses match NVML's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mlsched.core.errors import SpecError

__all__ = ["Device", "nvml_devices", "parse_gpus", "select", "visible_devices"]


@dataclass(frozen=True)
class Device:
    """One device NVML lists: a GPU, or a MIG instance of one (``parent``: its GPU's index)."""

    index: int  # NVML index (of the parent GPU for a MIG instance)
    uuid: str
    name: str
    memory_bytes: int
    mig: bool = False

    @property
    def visible_as(self) -> str:
        """What ``CUDA_VISIBLE_DEVICES`` names it by: its UUID, else its index."""
        return self.uuid or str(self.index)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_devices(nv: Any) -> list[Device]:
    """Every usable device ``nv`` (pynvml, initialised) lists: GPUs, and for a GPU in MIG
    mode its MIG instances instead of it."""
    out: list[Device] = []
    for i in range(nv.nvmlDeviceGetCount()):
        handle = nv.nvmlDeviceGetHandleByIndex(i)
        name = _text(nv.nvmlDeviceGetName(handle))
        uuid = _text(_optional(lambda h=handle: nv.nvmlDeviceGetUUID(h)) or "")
        memory = int(nv.nvmlDeviceGetMemoryInfo(handle).total)
        mode = _optional(lambda h=handle: nv.nvmlDeviceGetMigMode(h))
        if mode is not None and mode[0] == getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1):
            count = int(_optional(lambda h=handle: nv.nvmlDeviceGetMaxMigDeviceCount(h)) or 0)
            for j in range(count):
                mig = _optional(lambda h=handle, j=j: nv.nvmlDeviceGetMigDeviceHandleByIndex(h, j))
                if mig is None:  # an empty slot
                    continue
                out.append(
                    Device(
                        index=i,
                        uuid=_text(nv.nvmlDeviceGetUUID(mig)),
                        name=_text(_optional(lambda m=mig: nv.nvmlDeviceGetName(m)) or name),
                        memory_bytes=int(nv.nvmlDeviceGetMemoryInfo(mig).total),
                        mig=True,
                    )
                )
            continue
        out.append(Device(index=i, uuid=uuid, name=name, memory_bytes=memory))
    return out


def _optional(read: Any) -> Any:
    try:
        return read()
    except Exception:  # a query this GPU or driver does not answer (NVMLError)
        return None


def parse_gpus(text: str | None) -> int | tuple[int, ...] | None:
    """``--gpus``: a count (``4``) or NVML indices (``0,2``); a SpecError names the flag."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() for p in parts):
        raise SpecError("--gpus", text, "a count (4) or NVML indices separated by commas (0,2)")
    if len(parts) == 1 and "," not in text:
        return int(parts[0])
    indices = tuple(int(p) for p in parts)
    if len(set(indices)) != len(indices):
        raise SpecError("--gpus", text, "each index once")
    return indices


def _inherited(devices: Sequence[Device], cvd: str) -> list[Device]:
    """The devices an inherited ``CUDA_VISIBLE_DEVICES`` leaves, in its order (CUDA stops
    at the first entry it cannot resolve; so does this)."""
    out: list[Device] = []
    for entry in (e.strip() for e in cvd.split(",")):
        if entry.isdigit():
            found = [d for d in devices if d.index == int(entry) and not d.mig]
        else:
            found = [d for d in devices if d.uuid and d.uuid.startswith(entry)] if entry else []
        if len(found) != 1:
            break
        if found[0] not in out:
            out.append(found[0])
    return out


def select(
    devices: Sequence[Device],
    *,
    gpus: int | tuple[int, ...] | None = None,
    uuids: Sequence[str] = (),
    inherited: str | None = None,
) -> list[Device]:
    """The devices an agent takes (module docstring). An index or UUID that is not there
    (or not visible to the agent) is a SpecError naming the flag. ``gpus`` as a count
    larger than what there is, is for the caller: stand-ins."""
    pool = list(devices) if inherited is None else _inherited(devices, inherited)
    where = "" if inherited is None else f" (CUDA_VISIBLE_DEVICES={inherited!r} leaves these)"
    if uuids:
        if gpus is not None:
            raise SpecError("--gpu-uuids", ",".join(uuids), "either --gpus or --gpu-uuids")
        chosen = []
        for u in uuids:
            match = [d for d in pool if d.uuid == u]
            if not match:
                known = ", ".join(d.uuid for d in pool if d.uuid) or "none"
                raise SpecError("--gpu-uuids", u, f"one of this machine's: {known}{where}")
            chosen.append(match[0])
        return chosen
    if isinstance(gpus, tuple):
        chosen = []
        for i in gpus:
            match = [d for d in pool if d.index == i and not d.mig]
            if not match:
                known = ", ".join(str(d.index) for d in pool if not d.mig) or "none"
                raise SpecError("--gpus", i, f"an NVML index of a whole GPU here: {known}{where}")
            chosen.append(match[0])
        return chosen
    if gpus is None:
        return pool
    return pool[:gpus]


def visible_devices(devices: Sequence[Device], positions: Sequence[int]) -> str:
    """A task's ``CUDA_VISIBLE_DEVICES``: the devices at the controller's ``positions``."""
    return ",".join(devices[p].visible_as for p in positions)
