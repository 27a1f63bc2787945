"""``fill_at_once``: a frozen dataclass's ``__init__`` made to fill the instance at once must
be the dataclass's own in every way a caller sees: signature, defaults, a fresh default from
each factory, ``__post_init__``, the instance's fields in order, and the errors for missing
or unknown arguments. Plausible bugs: a factory's default shared between instances, a
default taken from the wrong field, ``__post_init__`` skipped, positional order lost."""

from __future__ import annotations

import dataclasses
import inspect
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from mlsched.core.frozen import fill_at_once
from mlsched.core.job import JobSpec


def _make() -> type:
    @dataclass(frozen=True)
    class Spec:
        name: str
        count: int = 3
        scale: float = 0.5
        tags: dict[str, int] = field(default_factory=dict)
        items: list[int] = field(default_factory=list)
        note: str | None = None

        def __post_init__(self) -> None:
            object.__setattr__(self, "total", self.count * self.scale + len(self.tags))

    return Spec


PLAIN, FAST = _make(), fill_at_once(_make())


def test_the_signature_and_defaults_are_the_dataclass_s() -> None:
    assert str(inspect.signature(FAST.__init__)) == str(inspect.signature(PLAIN.__init__))


@pytest.mark.parametrize("seed", range(8))
def test_instances_are_the_dataclass_s(seed: int) -> None:
    rng = random.Random(seed)
    names = [f.name for f in dataclasses.fields(PLAIN)]
    values: dict[str, Any] = {
        "name": f"job-{rng.randrange(100)}",
        "count": rng.randrange(10),
        "scale": rng.random(),
        "tags": {f"t{i}": i for i in range(rng.randrange(3))},
        "items": [rng.randrange(5) for _ in range(rng.randrange(3))],
        "note": rng.choice([None, "n"]),
    }
    given = {k: v for k, v in values.items() if k == "name" or rng.random() < 0.5}
    k = rng.randrange(1, len(names) + 1)  # the first k given by position
    positional = [values[n] for n in names[:k]]
    keywords = {n: v for n, v in given.items() if n not in names[:k]}
    plain, fast = PLAIN(*positional, **keywords), FAST(*positional, **keywords)
    assert list(vars(fast).items()) == list(vars(plain).items())  # order too
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.count = 1


def test_each_instance_gets_a_fresh_default_from_the_factories() -> None:
    a, b = FAST("a"), FAST("b")
    assert a.tags == {} and a.tags is not b.tags and a.items is not b.items


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((), {}), (("a",), {"nope": 1}), (("a", 1, 0.5, {}, [], None, "extra"), {}),
     (("a",), {"name": "b"})],
)  # fmt: skip
def test_bad_arguments_fail_as_the_dataclass_s(args: tuple[Any, ...], kwargs: dict[str, Any]):
    with pytest.raises(TypeError):
        PLAIN(*args, **kwargs)
    with pytest.raises(TypeError):
        FAST(*args, **kwargs)


def test_a_class_it_cannot_fill_is_refused() -> None:
    @dataclass
    class NotFrozen:
        a: int

    @dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    @dataclass(frozen=True)
    class KeywordOnly:
        a: int = field(kw_only=True)

    for cls in (NotFrozen, Slotted, KeywordOnly):
        with pytest.raises(TypeError):
            fill_at_once(cls)


def test_job_specs_keep_their_validation_and_replace() -> None:
    spec = JobSpec("j-1", arch="allreduce", compute_s_by_type={"k80": 1.0})
    assert spec.sync.value == "sync" and spec.total_work == 1.0
    assert dataclasses.replace(spec, epochs=2).total_work == 2.0
    assert spec.worker_types == {} and spec.worker_types is not JobSpec("j-2").worker_types
    with pytest.raises(Exception, match="epochs"):
        JobSpec("j-3", epochs=0)
