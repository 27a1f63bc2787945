"""The machine a benchmark ran on, recorded beside its figures (CPU model, cores, Python,
torch, Horovod, load)."""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    out: dict[str, Any] = {
        "cpu_model": cpu,
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "loadavg_1_5_15": list(os.getloadavg()),
    }
    try:
        import horovod

        out["horovod"] = horovod.__version__
    except ImportError:
        out["horovod"] = None
    return out


def horovod_ok() -> bool:
    from mlsched.trainers.allreduce.horovod import horovod_available

    return horovod_available() and _horovodrun() is not None


def _horovodrun() -> str | None:
    return shutil.which("horovodrun", path=str(Path(sys.executable).parent)) or shutil.which(
        "horovodrun"
    )
