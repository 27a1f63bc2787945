"""Every mutant of scripts/mutation_check.py still finds its text, once: a refactor that
rewrites a mutated line fails here, in ``make test``, rather than in the mutation step at
the end of CI. Which bug fails it: a mutant whose target was edited away (it would mutate
nothing, or the step would stop before running any)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "mutation_check", ROOT / "scripts" / "mutation_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutation_check", module)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


@pytest.mark.parametrize("mutant", SCRIPT.MUTANTS, ids=lambda m: m.name)
def test_each_mutant_finds_its_text_once(mutant: Any) -> None:
    text = (ROOT / mutant.path).read_text(encoding="utf-8")
    assert SCRIPT.find_problem(mutant, text) is None
    for test in mutant.tests:
        path = test.split("::")[0]
        if path.endswith(".py"):
            assert (ROOT / path).is_file(), path
