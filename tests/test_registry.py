"""Policies by name: the built-ins, a class registered at run time, a ``module:Class``
reference and an installed plugin (an entry point found by importlib.metadata on
``sys.path``), and what each refuses.

The plugin is a real distribution: a ``*.dist-info`` directory with ``entry_points.txt`` and
a module beside it on ``sys.path``, found the way an installed package is.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mlsched.scheduler.policy import Policy
from mlsched.scheduler.registry import (
    BUILTIN,
    ENTRY_POINT_GROUP,
    available,
    create,
    policy_class,
    policy_options,
    register,
    registered,
)
from mlsched.workloads.loading import load_workload

_POLICY_SOURCE = """
from mlsched import Allocation, Policy, Admission


class Greedy(Policy):
    name = "{name}"
    description = "test: admit every job, place none"

    def __init__(self, *, patience: int = 3, **options):
        super().__init__(**options)
        self.patience = patience

    def on_arrival(self, job, view):
        return Admission.admit()

    def allocate(self, slot, view):
        return Allocation(slot, {{}})
"""


def _write_module(root: Path, module: str, name: str) -> None:
    (root / f"{module}.py").write_text(textwrap.dedent(_POLICY_SOURCE.format(name=name)))


def _install_plugin(root: Path, module: str, name: str) -> None:
    """A distribution named like the module, whose entry point names ``name``."""
    _write_module(root, module, name)
    info = root / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {module}:Greedy\n")


def test_every_builtin_loads_under_its_own_name() -> None:
    for name, ref in BUILTIN.items():
        cls = policy_class(name)
        assert cls.name == name and f"{cls.__module__}:{cls.__qualname__}" == ref
        assert cls.description
    assert set(BUILTIN) <= set(registered()) and set(BUILTIN) <= set(available())


def test_a_module_class_reference_runs_in_the_simulator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlsched.engine.builder import SimulationConfig, check_policies, simulate

    _write_module(tmp_path, "refpolicy", "ref-greedy")
    monkeypatch.syspath_prepend(str(tmp_path))
    check_policies(["refpolicy:Greedy"])
    policy = create("refpolicy:Greedy", patience=5)
    assert policy.name == "ref-greedy" and policy.patience == 5  # type: ignore[attr-defined]
    workload = load_workload("demo", jobs=3)
    result = simulate(workload, SimulationConfig("refpolicy:Greedy"), cache=False)
    assert set(result.records) == {j.job_id for j in workload.jobs}
    assert all(r.admitted_slot is not None for r in result.records.values())  # it admitted


def test_an_installed_plugin_is_found_by_its_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_plugin(tmp_path, "plugpolicy", "plug-greedy")
    assert "plug-greedy" not in available()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert available()["plug-greedy"] == "test: admit every job, place none"
    assert policy_class("plug-greedy").__module__ == "plugpolicy"
    assert [o.name for o in policy_options(policy_class("plug-greedy"))] == ["patience"]


def test_a_plugin_whose_class_calls_itself_otherwise_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_plugin(tmp_path, "liarpolicy", "liar")
    (tmp_path / "liarpolicy.py").write_text(_POLICY_SOURCE.format(name="something-else"))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"'liar' .* calls itself 'something-else'"):
        policy_class("liar")


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no_such_module_here:Cls", "cannot import no_such_module_here"),
        ("mlsched.core.job:NoSuch", "has no NoSuch"),
        ("mlsched.core.job:JobSpec", "not a Policy subclass"),
        ("mlsched.core.job:", "package.module:Class"),
        ("no-such-policy", "unknown policy 'no-such-policy'; known: .*fifo"),
    ],
)
def test_bad_references_name_what_is_wrong(ref: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create(ref)


def test_register_binds_a_name_once_and_never_a_builtins() -> None:
    class Mine(Policy):
        name = "test-registry-mine"
        description = "test: a policy registered at run time"

    class Other(Policy):
        name = "test-registry-mine"
        description = "test: another with the same name"

    class Impostor(Policy):
        name = "fifo"
        description = "test: a built-in's name"

    class Nameless(Policy):
        description = "test: no name"

    class Silent(Policy):
        name = "test-registry-silent"

    assert register(Mine) is Mine and register(Mine) is Mine  # the same class again: fine
    assert policy_class("test-registry-mine") is Mine and "test-registry-mine" in available()
    with pytest.raises(ValueError, match="already registered"):
        register(Other)
    with pytest.raises(ValueError, match="built-in"):
        register(Impostor)
    with pytest.raises(ValueError, match="no name"):
        register(Nameless)
    with pytest.raises(ValueError, match="description"):
        register(Silent)
    with pytest.raises(ValueError, match="not a Policy subclass"):
        register(int)  # type: ignore[type-var]


def test_options_follow_the_keywords_down_the_bases() -> None:
    fifo = {o.name: o for o in policy_options(policy_class("fifo"))}
    assert fifo["max_workers"].type == "int" and fifo["max_workers"].default == 30
    assert fifo["ps_rule"].to_dict() == {
        "name": "ps_rule",
        "type": "str",
        "default": "drawn",
        "required": False,
    }
    # AntMan passes **options on to its base: the base's keywords are its options too.
    antman = [o.name for o in policy_options(policy_class("antman"))]
    assert antman[:2] == ["guarantee_share", "promote_after"] and "max_workers" in antman


def test_bad_options_are_refused_naming_the_policy() -> None:
    with pytest.raises(ValueError, match=r"policy 'fifo'.*no_such_option"):
        create("fifo", no_such_option=1)


def test_the_public_api_names_resolve_and_match_their_sources() -> None:
    """``from mlsched import X`` for every name of ``mlsched.__all__``: each resolves to the
    object of the module it is documented from, and the literal list (what linters and type
    checkers read) holds exactly the lazily exported names."""
    import importlib

    import mlsched

    sources = mlsched._SOURCES  # type: ignore[attr-defined]
    assert sorted(mlsched.__all__) == sorted(n for names in sources.values() for n in names)
    for module, names in sources.items():
        home = importlib.import_module(f"mlsched.{module}")
        for name in names:
            assert getattr(mlsched, name) is getattr(home, name), name
