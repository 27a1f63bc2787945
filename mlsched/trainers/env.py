"""The environment variables launchers set, read in one place (one function per variable).

torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``;
horovodrun sets ``HOROVOD_RANK`` and friends (read by Horovod itself). Where they are set,
they override the command line's rank layout, because the launcher owns it.
"""

from __future__ import annotations

import os

__all__ = [
    "gpu_local_rank",
    "horovod_rank",
    "local_rank",
    "master_addr",
    "master_port",
    "rank",
    "under_torchrun",
    "world_size",
]


def under_torchrun() -> bool:
    """True inside a torchrun-launched process."""
    return "TORCHELASTIC_RUN_ID" in os.environ or (
        "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ
    )


def rank() -> int:
    """Global rank (``RANK``)."""
    return int(os.environ["RANK"])


def world_size() -> int:
    """Number of ranks (``WORLD_SIZE``)."""
    return int(os.environ["WORLD_SIZE"])


def local_rank() -> int:
    """Rank on this machine (``LOCAL_RANK``), which selects the GPU."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def horovod_rank() -> int | None:
    """Global rank under horovodrun (``HOROVOD_RANK``), None outside it."""
    value = os.environ.get("HOROVOD_RANK")
    return int(value) if value is not None else None


def gpu_local_rank() -> int:
    """Which local GPU this process drives: torchrun's ``LOCAL_RANK`` or horovodrun's
    ``HOROVOD_LOCAL_RANK``; 0 for a process started on its own."""
    for name in ("LOCAL_RANK", "HOROVOD_LOCAL_RANK"):
        if name in os.environ:
            return int(os.environ[name])
    return 0


def master_addr() -> str:
    return os.environ["MASTER_ADDR"]


def master_port() -> int:
    return int(os.environ["MASTER_PORT"])
