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

_BASE = {"lazy"}
#: Top-level package or module -> what it may import (besides itself). Left to right in the
#: diagram of docs/architecture.md; emulation and the command line sit over everything.
ALLOWED: dict[str, set[str]] = {
    "lazy": set(),
    "v1": set(),
    "core": _BASE,
    "cli_parser": {"core"},
    "perfmodel": _BASE | {"core"},
    "net": _BASE | {"core", "v1"},
    "scheduler": _BASE | {"core", "perfmodel"},
    "trainers": _BASE | {"core", "net"},
    "agent": _BASE | {"core", "net", "trainers", "v1"},
    "engine": _BASE | {"core", "perfmodel", "scheduler"},
    "workloads": _BASE | {"core", "cli_parser", "perfmodel", "scheduler", "engine"},
    "experiments": _BASE | {"core", "cli_parser", "perfmodel", "scheduler", "engine", "workloads"},
    "controller": _BASE
    | {"core", "cli_parser", "perfmodel", "scheduler", "engine", "net", "trainers", "v1"},
    "demo": _BASE
    | {"core", "cli_parser", "perfmodel", "scheduler", "engine", "net", "trainers", "controller"},
}
#: Over every other part (they wire the parts together for a command).
TOP = {
    "emulation", "profiling", "cli", "cli_commands", "cli_config", "cli_demo", "cli_simulate",
    "__main__", "api",
}  # fmt: skip


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
    return module.split(".")[1] if "." in module else "<package>"


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


def test_every_part_is_placed_in_a_layer() -> None:
    parts = {_part(m) for m in _modules()} - {"<package>"}
    assert parts - set(ALLOWED) - TOP == set(), "a new package: place it in ALLOWED"


def test_no_module_imports_against_the_layers() -> None:
    modules = _modules()
    wrong = []
    for module, path in modules.items():
        source = _part(module)
        if source in TOP or source == "<package>":
            continue
        for line, name in _imported(path):
            if not name.startswith("mlsched."):
                continue
            target = _part(name)
            if target != source and target not in ALLOWED[source]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    assert wrong == []


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
