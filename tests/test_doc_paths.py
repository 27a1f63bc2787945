"""Every path and module the docs name exists: a file or folder named from the repository's
root (``mlsched/testbed/local.py``, ``tests/...``), a module or a name in one
(``mlsched.testbed.emulated.probe``, ``mlsched.cli:main``), and a module path relative to
the package (``engine/coast.py``). A move that leaves a doc naming the old place fails here.

Read: README.md, docs/, deploy/, the Makefile, .ci/run, pyproject.toml, MANIFEST.in, and the
docstrings and comments of the code, tests, benchmarks and scripts. Not checked: paths under
what git ignores (``results/``, ``benchmarks/results/``: outputs of runs), the first column
of a table headed ``was`` (a record of where something used to be), and other projects'
paths (a relative path whose first folder is none of the package's).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mlsched"
ROOTED = ("mlsched", "tests", "benchmarks", "scripts", "deploy", "docs", "protos")
#: Names that look like modules but are not: what they are.
NOT_MODULES = {"mlsched.profile": "the profile file's schema name (docs/profiles.md)"}
#: Dotted names ending so are file names (``mlsched.db``, ``deploy/slurm/mlsched.sbatch``).
FILE_SUFFIXES = {"db", "json", "sbatch", "conf", "sysusers", "service", "yaml", "yml", "csv"}

_ROOTED = re.compile(r"(?<![\w./-])(?:" + "|".join(ROOTED) + r")/[\w./*-]*")
_DOTTED = re.compile(r"(?<![\w./-])mlsched(?:\.\w+)+(?::\w+)?")
_RELATIVE = re.compile(r"(?<![\w./-])([a-z_]\w*)/[\w/]*\w\.py\b")


def _doc_files() -> list[Path]:
    docs = [*ROOT.glob("*.md"), *sorted((ROOT / "docs").rglob("*.md"))]
    docs += [ROOT / n for n in ("Makefile", ".ci/run", "pyproject.toml", "MANIFEST.in")]
    docs += [p for p in sorted((ROOT / "deploy").rglob("*")) if p.is_file()]
    return docs


def _code_files() -> list[Path]:
    out = []
    for folder in ("mlsched", "tests", "benchmarks", "scripts"):
        out += [p for p in sorted((ROOT / folder).rglob("*.py")) if "v1" not in p.parts]
    return out


def _prose(path: Path) -> str:
    """A code file's docstrings and comments (its imports fail by themselves), each on its
    own line number."""
    text = path.read_text(encoding="utf-8")
    source = text.splitlines()
    lines = ["" for _ in source]
    for node in ast.walk(ast.parse(text)):
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if docstring and isinstance(node.value.value, str):  # type: ignore[attr-defined]
            for i in range(node.lineno - 1, node.end_lineno or node.lineno):
                lines[i] = source[i]
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT and not lines[token.start[0] - 1]:
            lines[token.start[0] - 1] = token.string
    return "\n".join(lines)


def _history_cells(text: str) -> str:
    """The text less the first cell of each row of a table whose header starts ``| was |``."""
    out, in_history = [], False
    for line in text.splitlines():
        if line.startswith("| was |"):
            in_history = True
        elif not line.startswith("|"):
            in_history = False
        elif in_history and not line.startswith("|---"):
            line = "|" + line.split("|", 2)[2]
        out.append(line)
    return "\n".join(out)


def _module_file(dotted: str) -> Path | None:
    path = ROOT.joinpath(*dotted.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return path if path.is_dir() else None  # a namespace package


@cache
def _names_in(path: Path) -> frozenset[str]:
    """Every name a module defines, imports, uses or spells in a string (its lazy tables)."""
    if path.is_dir():
        return frozenset(p.stem for p in path.iterdir())
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        for attr in ("name", "id", "attr", "arg", "asname"):
            value = getattr(node, attr, None)
            if isinstance(value, str):
                names.add(value)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.update(re.findall(r"\w+", node.value))
    return frozenset(names)


def _resolves(dotted: str) -> bool:
    """The dotted name is a module, or its longest module prefix holds the names after it
    (``mlsched.engine.executor.Executor.steady``)."""
    words = dotted.replace(":", ".").split(".")
    last: Path | None = None
    for i in range(1, len(words) + 1):
        found = _module_file(".".join(words[:i]))
        if found is None:
            return last is not None and set(words[i - 1 :]) <= _names_in(last)
        last = found
    return True


@cache
def _package_folders() -> frozenset[str]:
    return frozenset(p.name for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__")


@cache
def _package_files() -> tuple[str, ...]:
    return tuple(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py"))


def _ignored(paths: set[str]) -> set[str]:
    """The paths git ignores (outputs of runs), asked once."""
    if not paths:
        return set()
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        input="\n".join(sorted(paths)), capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    return set(proc.stdout.split())


def stale_references(path: Path, text: str) -> list[tuple[int, str]]:
    """(line, reference) of each path or module ``text`` names that does not exist."""
    found: list[tuple[int, str]] = []
    for number, line in enumerate(_history_cells(text).splitlines(), 1):
        for match in _ROOTED.finditer(line):
            token = match.group(0).rstrip(".,:;")
            stem, _, attr = token.rpartition(".")  # tests/engine_helpers.make_engine
            if "*" in token:  # a pattern: tests/test_hetero_*.py
                if any(ROOT.glob(token)):
                    continue
            elif (ROOT / token).exists() or (
                attr.isidentifier() and (ROOT / f"{stem}.py").exists()
            ):
                continue
            found.append((number, token))
        for match in _DOTTED.finditer(line):
            token = match.group(0)
            if token in NOT_MODULES or token.rpartition(".")[2] in FILE_SUFFIXES:
                continue
            if not _resolves(token):
                found.append((number, token))
        for match in _RELATIVE.finditer(line):
            token = match.group(0)
            if match.group(1) not in _package_folders() or match.group(1) in ROOTED:
                continue
            if not any(f == token or f.endswith("/" + token) for f in _package_files()):
                found.append((number, token))
    ignored = _ignored({t for _, t in found if "/" in t})
    return [(n, t) for n, t in found if t not in ignored and t.rstrip("/") not in ignored]


def test_every_path_and_module_the_docs_name_exists() -> None:
    stale = [
        f"{p.relative_to(ROOT)}:{n}: {t}"
        for p in _doc_files()
        for n, t in stale_references(p, p.read_text(encoding="utf-8"))
    ]
    assert stale == []


def test_every_path_and_module_the_code_s_prose_names_exists() -> None:
    stale = [
        f"{p.relative_to(ROOT)}:{n}: {t}"
        for p in _code_files()
        for n, t in stale_references(p, _prose(p))
    ]
    assert stale == []


@pytest.mark.parametrize(
    ("text", "stale"),
    [
        ("Code: `mlsched/emulation/cluster.py`.", ["mlsched/emulation/cluster.py"]),
        ("`python -m mlsched.emulation.probe serve ADDR`", ["mlsched.emulation.probe"]),
        ("see `mlsched.testbed.local.no_such_name`", ["mlsched.testbed.local.no_such_name"]),
        ("the runs (`testbed/fidelity/runs.py`)", ["testbed/fidelity/runs.py"]),
        ("`tests/test_no_such_file.py`", ["tests/test_no_such_file.py"]),
        ("`tests/test_no_such_*.py`", ["tests/test_no_such_*.py"]),
        ("`tests/test_layer*.py`, `mlsched.engine.executor.Executor.steady`", []),
        (
            "`mlsched.engine.executor.Executor.no_such_method`",
            ["mlsched.engine.executor.Executor.no_such_method"],
        ),
        ("Code: `mlsched/testbed/emulated/` and `mlsched/cli/entry.py`.", []),
        ("`python -m mlsched.testbed.emulated.probe`, `mlsched.cli:main`", []),
        ("`mlsched.testbed.local.demo_report` and `tests/engine_helpers.make_engine`", []),
        ("`engine/coast.py` and Gavel's `policies/fifo.py`", []),
        ("state in mlsched.db; written to `benchmarks/results/x.json`", []),
        ("| was | now |\n|---|---|\n| `mlsched/cli.py` | `mlsched/cli/entry.py` |", []),
    ],
)
def test_the_check_finds_what_no_longer_exists(text: str, stale: list[str]) -> None:
    assert [t for _, t in stale_references(ROOT / "README.md", text)] == stale
