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
    "mlsched.testbed.local",
    "mlsched.testbed.emulated",
    "mlsched.testbed.experiment",
    "mlsched.testbed.fidelity",
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


def test_a_subsystem_s_parser_pieces_import_nothing_of_the_command_line():
    # Subsystems' command modules build on mlsched.cli.parser; importing it must not run
    # the entry point, which imports every subsystem's command module back.
    modules = _modules_after("import mlsched.cli.parser")
    assert "mlsched.cli.parser" in modules
    assert {"mlsched.cli.entry", "mlsched.cli.commands"} & modules == set()


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


def test_the_entry_point_is_the_function_whatever_was_imported_first():
    # `python -m mlsched` imports the entry module first; the console script then asks the
    # package for `main`, which must still be the function.
    code = (
        "import mlsched.__main__\n"
        "from mlsched.cli import main\n"
        "assert callable(main) and main.__module__ == 'mlsched.cli.entry', main"
    )
    assert "mlsched.cli.entry" in _modules_after(code)


def test_no_lazy_export_shares_a_submodule_s_name():
    """Importing a submodule sets the package's attribute of that name to the module, so an
    export of the same name would be the module or the object depending on what was
    imported first."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "mlsched"
    clashes = []
    for init in root.rglob("__init__.py"):
        if "v1" in init.parts or "lazy_exports" not in init.read_text(encoding="utf-8"):
            continue
        package = ".".join(init.parent.relative_to(root.parent).parts)
        submodules = {p.stem for p in init.parent.glob("*.py")} | {
            p.name for p in init.parent.iterdir() if (p / "__init__.py").is_file()
        }
        exported = set(__import__(package, fromlist=["__all__"]).__all__)
        clashes += [f"{package}.{name}" for name in sorted(exported & submodules)]
    assert clashes == []
