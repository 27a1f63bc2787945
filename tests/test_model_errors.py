"""The model errors a run keeps (mlsched.engine.model_errors): shared entries read back as
one error per job and slot, in order, however they are read.

Which bug fails it: a shared entry read with the wrong slot (its mark's neighbour, or a
mark that two slots share), a slice or a negative index that skips the marks, columns out
of order, or a copy or a pickle that loses the marks.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from mlsched.engine.model_errors import SHARED, ModelErrors
from mlsched.engine.results import ModelError


def _kept(seed: int) -> tuple[ModelErrors, list[ModelError]]:
    """Random slots of own and shared entries, and the plain list they stand for."""
    rng = np.random.default_rng(seed)
    errors, plain = ModelErrors(), []
    shared = [(f"j{i}", float(i + 1), 2.0 * i + 1) for i in range(5)]
    entries = [errors.entry(*e) for e in shared]
    for t in range(int(rng.integers(5, 40))):
        keep = errors.shared(t)
        if rng.random() < 0.2:
            errors.shared(t)  # a slot marked twice keeps one mark
        for _ in range(int(rng.integers(0, 6))):
            if rng.random() < 0.5:
                k = int(rng.integers(0, len(entries)))
                keep(entries[k])
                job_id, predicted, measured = shared[k]
                plain.append(ModelError(job_id, t, predicted, measured))
            else:
                own = ModelError(f"own{t}", t, float(rng.random()), float(rng.random()))
                errors.append(own)
                plain.append(own)
    return errors, plain


@pytest.mark.parametrize("seed", range(8))
def test_read_back_as_one_error_per_job_and_slot(seed: int) -> None:
    errors, plain = _kept(seed)
    assert list(errors) == plain and errors == plain
    assert len(errors) == len(plain)
    assert all(e.slot != SHARED for e in errors)
    assert [errors[i] for i in range(len(plain))] == plain
    assert [errors[-i] for i in range(1, len(plain) + 1)] == plain[::-1]
    assert errors[3:-2] == plain[3:-2] and errors[::3] == plain[::3]
    predicted, measured = errors.columns()
    assert predicted.tolist() == [e.predicted_s for e in plain]
    assert measured.tolist() == [e.measured_s for e in plain]
    copy = errors.copy()
    copy.append(ModelError("later", 99, 1.0, 1.0))
    assert list(errors) == plain and list(copy) == [*plain, ModelError("later", 99, 1.0, 1.0)]
    assert list(pickle.loads(pickle.dumps(errors))) == plain
    assert list(pickle.loads(pickle.dumps(copy))) == list(copy)


def test_no_errors_read_as_empty_columns() -> None:
    predicted, measured = ModelErrors().columns()
    assert predicted.shape == measured.shape == (0,)


def test_a_plain_list_reads_the_same() -> None:
    plain = [ModelError("a", 0, 1.1, 1.0), ModelError("b", 1, 0.8, 1.0)]
    errors = ModelErrors(plain)
    assert list(errors) == plain and errors[1] == plain[1] and errors != plain[:1]
