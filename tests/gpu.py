"""Why a GPU test cannot run here, told honestly: no GPU, a GPU but a CPU-only torch
build (the Makefile's pin installs one), a CUDA torch that cannot use the GPU, or no NVML.
A GPU test is skipped with the reason, never faked."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path

import torch

from mlsched.trainers.telemetry import gpu_inventory

DOCS = "docs/deploy.md, 'CUDA torch on GPU machines'"


@cache
def gpus_present() -> bool:
    """An NVIDIA GPU on this machine, by NVML, the driver's /proc entries or nvidia-smi."""
    if gpu_inventory():
        return True
    proc = Path("/proc/driver/nvidia/gpus")
    if proc.is_dir() and any(proc.iterdir()):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


@cache
def cuda_skip_reason() -> str | None:
    """None when torch can train on a GPU here; else why not."""
    if not gpus_present():
        return "no NVIDIA GPU on this machine (NVML, /proc/driver/nvidia and nvidia-smi see none)"
    if torch.version.cuda is None:
        return (
            f"an NVIDIA GPU is present but torch {torch.__version__} is a CPU-only build "
            f"(the Makefile's pin): install a CUDA torch ({DOCS})"
        )
    if not torch.cuda.is_available():
        return (
            f"an NVIDIA GPU is present and torch {torch.__version__} is built for CUDA "
            f"{torch.version.cuda}, but torch.cuda.is_available() is False (a driver older "
            f"than that CUDA, or CUDA_VISIBLE_DEVICES hides the GPUs)"
        )
    return None


@cache
def nvml_skip_reason() -> str | None:
    """None when torch can use a GPU and NVML answers (the agent's telemetry); else why not."""
    reason = cuda_skip_reason()
    if reason is None and not gpu_inventory():
        return "torch sees a GPU but NVML does not answer (nvidia-ml-py or libnvidia-ml missing)"
    return reason
