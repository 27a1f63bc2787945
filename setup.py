"""The package's build step beyond setuptools': the gRPC stubs (``mlsched/v1/``) are
generated from ``protos/`` whenever the package is built, into the wheel or, for an
editable install, into the source tree. Generated code is never committed.

Generated stubs refuse to import under an older grpcio or protobuf than the ones that
generated them, so the runtime floors of both are read from the stubs this build makes
(the rest of the dependencies are listed here as they would be in pyproject.toml).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent

DEPENDENCIES = [
    "numpy>=1.24",
    "scipy>=1.11",
    # HiGHS's own interface: a MILP from a feasible start (scipy's milp takes none).
    "highspy>=1.8,<2",
    "PyYAML>=6.0",
    "matplotlib>=3.7",
    "tqdm>=4.65",
    "psutil>=5.9",
    # NVML bindings; the trainers fall back cleanly where the NVML library is absent.
    "nvidia-ml-py>=12.535",
    "grpcio-health-checking>=1.60",
    "grpcio-status>=1.60",
    # mlsched certs: the cluster's CA, server and client certificates.
    "cryptography>=42",
    # The controller's metrics endpoint (--metrics-listen).
    "prometheus-client>=0.17",
    # The trainers need torch; a range that the pinned CPU build (2.13.0) meets.
    "torch>=2.2",
]


def generate_stubs(out: Path) -> None:
    """protoc (grpcio-tools, a build requirement) over every proto, into ``out``."""
    import importlib.resources

    from grpc_tools import protoc

    protos = sorted((ROOT / "protos").glob("mlsched/v1/*.proto"))
    if not protos:
        raise SystemExit(f"no .proto files under {ROOT / 'protos'}")
    well_known = importlib.resources.files("grpc_tools") / "_proto"
    out.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{ROOT / 'protos'}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--pyi_out={out}",
        *(str(p) for p in protos),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed on " + " ".join(p.name for p in protos))


def stub_floors() -> list[str]:
    """grpcio and protobuf requirements the generated stubs need at run time."""
    with tempfile.TemporaryDirectory() as tmp:
        generate_stubs(Path(tmp))
        stubs = Path(tmp) / "mlsched" / "v1"
        text = "".join(p.read_text() for p in sorted(stubs.glob("*.py")))
    grpc = re.search(r"GRPC_GENERATED_VERSION = '([0-9.]+)'", text)
    pb = re.search(r"ValidateProtobufRuntimeVersion\(\s*\S+,\s*(\d+),\s*(\d+),\s*(\d+),", text)
    out = [f"grpcio>={grpc.group(1)}" if grpc else "grpcio>=1.60"]
    if pb:
        major, minor, patch = (int(x) for x in pb.groups())
        out.append(f"protobuf>={major}.{minor}.{patch},<{major + 1}")
    else:
        out.append("protobuf>=4.25")
    return out


class BuildWithStubs(build_py):
    def run(self) -> None:
        super().run()
        generate_stubs(ROOT if self.editable_mode else Path(self.build_lib))


setup(cmdclass={"build_py": BuildWithStubs}, install_requires=DEPENDENCIES + stub_floors())
