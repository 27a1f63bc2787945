"""The package's layers (docs/architecture.md): each package imports only the packages
below it, and no module imports itself back through others.

Imports are read from the source (every ``import`` statement, at module level, inside
functions and under ``TYPE_CHECKING`` alike), so a cycle hidden in a function body or a
type-only import counts as much as one at the top of a file: a module that needs a type
from a package above it asks for a protocol of its own instead.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mlsched"

#: Top-level package -> what it may import (besides itself). Left to right in the diagram of
#: docs/architecture.md. ``cli.parser`` (the parser pieces every command shares) is a layer
#: of its own just above core, so that a subsystem's command module may build on it; the
#: rest of ``cli`` sits over every part, and the package root (``__init__``, the public
#: API, and ``__main__``) over that.
_BELOW_TESTBED = {
    "core", "cli.parser", "perfmodel", "scheduler", "engine", "workloads", "experiments",
    "controller", "net", "trainers", "agent", "profiling", "v1",
}  # fmt: skip
ALLOWED: dict[str, set[str]] = {
    "v1": set(),
    "core": set(),
    "cli.parser": {"core"},
    "perfmodel": {"core"},
    "net": {"core", "v1"},
    "scheduler": {"core", "perfmodel"},
    "trainers": {"core", "net"},
    "agent": {"core", "net", "trainers", "v1"},
    "engine": {"core", "perfmodel", "scheduler"},
    "workloads": {"core", "cli.parser", "perfmodel", "scheduler", "engine"},
    "experiments": {"core", "cli.parser", "perfmodel", "scheduler", "engine", "workloads"},
    "controller": {"core", "cli.parser", "perfmodel", "scheduler", "engine", "net", "trainers"}
    | {"v1"},
    "profiling": {"core", "cli.parser", "perfmodel", "net", "trainers", "controller", "v1"},
    # The controller and the agents do not know the testbed; it runs them together.
    "testbed": _BELOW_TESTBED,
    "cli": _BELOW_TESTBED | {"testbed"},
    "__main__": {"cli"},
}
#: Parts that are the first two names of a module, not the first (``mlsched.cli.parser``).
SUBLAYERS = {"cli.parser"}
#: The package root's own modules: what ``from mlsched import ...`` offers, over every part.
ROOT = {"<package>"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(p): p
        for p in sorted(PACKAGE.rglob("*.py"))
        if "v1" not in p.relative_to(PACKAGE).parts
    }


def _imported(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every mlsched name the file imports, wherever it does."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module a dotted name lives in (its longest prefix that is a module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _part(module: str) -> str:
    names = module.split(".")
    if len(names) > 2 and f"{names[1]}.{names[2]}" in SUBLAYERS:
        return f"{names[1]}.{names[2]}"
    return names[1] if len(names) > 1 else "<package>"


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for _, name in _imported(path):
            target = _resolve(name, modules) if name.startswith("mlsched") else None
            if target is not None and target != module:
                graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _against_the_layers(modules: dict[str, Path]) -> list[str]:
    """``file:line imports name`` for each import of a part its layer may not import."""
    wrong = []
    for module, path in modules.items():
        source = _part(module)
        if source in ROOT:
            continue
        for line, name in _imported(path):
            if not name.startswith("mlsched."):
                continue
            target = _part(name)
            if target != source and target not in ALLOWED.get(source, set()):
                wrong.append(f"{module}:{line} imports {name}")
    return wrong


def test_every_part_is_placed_in_a_layer() -> None:
    parts = {_part(m) for m in _modules()} - ROOT
    assert parts - set(ALLOWED) == set(), "a new package: place it in ALLOWED"


def test_no_module_imports_against_the_layers() -> None:
    assert _against_the_layers(_modules()) == []


@pytest.mark.parametrize(
    ("module", "source", "refused"),
    [
        # The controller and the agents do not know the testbed that runs them.
        ("mlsched.controller.server", "from mlsched.testbed.local import run_cluster_demo", True),
        ("mlsched.agent.daemon", "import mlsched.testbed.emulated.netns", True),
        # cli sits over everything: no part but the package root imports it...
        ("mlsched.testbed.cli", "from mlsched.cli.entry import main", True),
        ("mlsched.controller.cli", "from mlsched.cli import main", True),
        # ... except its shared parser pieces, which import nothing of the rest of cli.
        ("mlsched.controller.cli", "from mlsched.cli.parser import positive_int", False),
        ("mlsched.cli.parser", "from mlsched.cli.config import Config", True),
        ("mlsched.testbed.local", "from mlsched.controller.server import Controller", False),
        ("mlsched.cli.demo", "from mlsched.testbed.local import demo_report", False),
        ("mlsched.core.job", "from mlsched.engine.engine import Engine", True),
        ("mlsched.mystery.x", "import mlsched.core", True),  # a part with no layer
    ],
)
def test_the_layer_check_refuses_what_the_layers_do_not_allow(
    tmp_path: Path, module: str, source: str, refused: bool
) -> None:
    path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True)
    path.write_text(f"def f():\n    {source}\n")  # inside a function: still an import
    assert bool(_against_the_layers({module: path})) is refused


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}}, [["a", "b", "c"]]),
    ],
)
def test_the_cycle_finder_finds_cycles(
    graph: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert _cycles(graph) == expected


def test_test_and_benchmark_files_stay_under_600_lines() -> None:
    """A file past 600 lines holds more than one subject: split it by what it tests."""
    root = PACKAGE.parent
    long = {
        str(p.relative_to(root)): n
        for folder in ("tests", "benchmarks")
        for p in sorted((root / folder).rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert long == {}


def test_test_modules_have_one_naming() -> None:
    """One prefix per subject: ``test_trainers_*`` and not also ``test_trainer_*`` (a word
    used both singular and plural as the first part of test module names)."""
    firsts = {p.stem.split("_")[1] for p in (PACKAGE.parent / "tests").glob("test_*_*.py")}
    assert {w for w in firsts if w + "s" in firsts} == set()
