"""Where a benchmark writes its JSON: ``--out`` names a file, or a directory to write the
benchmark's own file into (an existing directory, or a path that ends in a separator).
The directory is made before the runs, so a path that cannot be written fails at once with
a message naming ``--out``, not with a traceback after minutes of measuring."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["out_file", "ready"]


def out_file(name: str) -> Callable[[str], Path]:
    """An argparse ``type`` for ``--out``: the file, or ``DIR/name`` for a directory."""

    def parse(value: str) -> Path:
        if not value.strip():
            raise argparse.ArgumentTypeError("an output file or directory, not an empty string")
        path = Path(value)
        if value.endswith(("/", os.sep)) or path.is_dir():
            path = path / name
        return path

    parse.__name__ = "output path"  # argparse names the type so in its messages
    return parse


def ready(parser: argparse.ArgumentParser, path: Path) -> Path:
    """``path`` with its directory made; a parser error naming ``--out`` when it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"--out {path}: cannot make {path.parent} ({exc.strerror or exc})")
    if path.is_dir():
        parser.error(f"--out {path}: a directory already has this name")
    if not os.access(path.parent, os.W_OK):
        parser.error(f"--out {path}: {path.parent} is not writable")
    return path
