"""What the cheap commands import: building the parser (``mlsched --help``, ``mlsched status
--help``, ``--version``) must not pull in the simulator, the policies, the trainers or their
heavy dependencies, which made every command pay over a second before it started.

Each check runs in a fresh interpreter: this process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys

# Third-party packages, checked with their submodules.
HEAVY_PACKAGES = (
    "torch",
    "numpy",
    "scipy",
    "matplotlib",
    "grpc",
    "google.protobuf",
    "yaml",
    "psutil",
    "tqdm",
)
# Parts of mlsched that only running a command needs.
HEAVY_MLSCHED = (
    "mlsched.engine.engine",
    "mlsched.controller.server",
    "mlsched.scheduler",
    "mlsched.perfmodel",
    "mlsched.testbed",
    "mlsched.agent.daemon",
    "mlsched.agent.discovery",
    "mlsched.net.auth",
    "mlsched.v1",
)
# The trainers' package is imported for `mlsched train`'s options; nothing else of it.
TRAINERS_ALLOWED = ("mlsched.trainers", "mlsched.trainers.cli")


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    def under(name: str, roots: tuple[str, ...]) -> bool:
        return any(name == r or name.startswith(r + ".") for r in roots)

    return sorted(
        m
        for m in modules
        if under(m, HEAVY_PACKAGES)
        or under(m, HEAVY_MLSCHED)
        or (m.startswith("mlsched.trainers.") and m not in TRAINERS_ALLOWED)
    )


def test_building_the_parser_imports_nothing_heavy():
    modules = _modules_after(
        "import mlsched.cli\n"
        "parser = mlsched.cli.get_args_parser()\n"
        "parser.parse_args(['status', '--controller', 'ctl:50051'])\n"
        "parser.parse_args(['agent', '--controller', 'ctl:50051'])\n"
        "parser.format_help()"
    )
    assert "mlsched.cli" in modules
    assert _heavy(modules) == []


def test_python_m_mlsched_imports_nothing_heavy():
    assert _heavy(_modules_after("import mlsched.__main__")) == []


def test_core_errors_do_not_import_the_domain_model():
    # Every module that raises SpecError imports mlsched.core first; its re-exports are lazy.
    modules = _modules_after("import mlsched.core.errors")
    assert "numpy" not in modules
    assert "mlsched.core.allocation" not in modules


def test_lazy_reexports_still_resolve():
    code = (
        "import mlsched.agent, mlsched.core\n"
        "from mlsched.core import Cluster, JobSpec, SpecError\n"
        "from mlsched.core.cluster import Cluster as C\n"
        "from mlsched.agent import Agent, discover\n"
        "from mlsched.agent.daemon import Agent as A\n"
        "assert Cluster is C and Agent is A\n"
        "assert all(hasattr(mlsched.core, n) for n in mlsched.core.__all__)\n"
        "assert all(hasattr(mlsched.agent, n) for n in mlsched.agent.__all__)\n"
        "assert set(mlsched.core.__all__) <= set(dir(mlsched.core))\n"
        "assert not hasattr(mlsched.core, 'NoSuchName')"
    )
    assert "mlsched.agent.daemon" in _modules_after(code)
