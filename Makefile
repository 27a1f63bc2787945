# mlsched: the commands a new user runs. `make demo`, then `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install demo test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: a looser requirement would pull a multi-GB CUDA build.
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: install
	$(BIN)/mlsched demo

test: install
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q tests

lint: install
	$(BIN)/ruff check mlsched tests benchmarks
	$(BIN)/ruff format --check mlsched tests benchmarks
	$(BIN)/mypy mlsched

bench: install
	OMP_NUM_THREADS=1 $(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
