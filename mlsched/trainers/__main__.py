"""``python -m mlsched.trainers``: run one role/rank of a training job with explicit parameters.

This is what node agents launch. Every parameter of :class:`TrainConfig` is a flag
(``--model resnet20 --arch ps --mode async --role worker --rank 0 --num-workers 2 --num-ps 1
--rendezvous 127.0.0.1:29500 --stop-step 200 --checkpoint-dir DIR --metrics FILE ...``).
Exit status: 0 after a clean stop and checkpoint, 1 on a training or communication error
(a lost peer, a timeout), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import MISSING, fields
from enum import Enum
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.core.train_config import TrainConfig

__all__ = ["build_parser", "config_from_args", "exit_now", "main"]

log = logging.getLogger("mlsched.trainers")


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mlsched.trainers", description=__doc__.splitlines()[0]
    )
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not MISSING else None
        if isinstance(default, Enum):
            # argparse passes str defaults through ``type``; str(Role.WORKER) is
            # 'Role.WORKER' on Python >= 3.11, so give it the value.
            default = default.value
        kind: Any = str
        if isinstance(default, bool):
            kind = _bool
        elif isinstance(default, int):
            kind = int
        elif isinstance(default, float):
            kind = float
        required = f.default is MISSING and f.default_factory is MISSING
        parser.add_argument(
            flag, dest=f.name, type=kind, required=required, default=None if required else default
        )
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        cfg = config_from_args(args)
    except SpecError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from mlsched.trainers.run import run

    return run(cfg)


def exit_now(code: int) -> None:
    """Flush and leave without interpreter finalization: torch's communication threads
    (gloo's above all) can abort the process while C++ and Python objects are torn down
    after a run that had already ended cleanly, turning exit 0 into SIGABRT."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
