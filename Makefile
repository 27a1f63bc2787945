# mlsched: the commands a new user runs. `make demo`, then `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install protos demo demo-profiled test soak reproduce lint bench clean horovod mutation

install: $(STAMP)

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: a looser requirement would pull a multi-GB CUDA build.
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q -e '.[dev,ray]'
	$(MAKE) protos
	# Bytecode now, as a wheel install would: an editable install otherwise compiles every
	# module on each start where PYTHONDONTWRITEBYTECODE is set (~0.2 s per command).
	$(BIN)/python -m compileall -q mlsched
	touch $(STAMP)

# gRPC stubs are generated from protos/ at install time, never committed. They land in
# mlsched/v1/, matching the proto package mlsched.v1 so the generated imports resolve.
protos:
	$(BIN)/python -m grpc_tools.protoc -I protos --python_out=. --grpc_python_out=. \
		--pyi_out=. protos/mlsched/v1/*.proto

demo: install
	$(BIN)/mlsched demo

# The demo with each stand-in GPU a CPU slice and the runtime model's prior a profile of
# those slices, measured first (root; a few minutes the first time, then reused).
demo-profiled: install
	$(BIN)/mlsched demo --device-cores 0.3 --ps-cores 0.2 --measure-profile \
		--profile runs/profile-demo-slices.json

# Tests run side by side, one pytest-xdist worker per core (TEST_WORKERS=1: one after
# another); those that start training processes run one at a time (docs/testing.md).
TEST_WORKERS ?= auto
XDIST = -n $(TEST_WORKERS) --dist loadgroup

test: install
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q $(XDIST) -m "not reproduction and not soak" tests

# Long real-process runs, each beside a shorter sibling in make test (CI runs them).
soak: install
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m soak tests

# Each experiment at the scale where its claims must hold (minutes each; docs/testing.md).
# Runs two experiments share are simulated once (MLSCHED_RUN_CACHE, a directory per session).
reproduce: install
	cache=$$(mktemp -d -t mlsched-runs.XXXXXX) && \
	OMP_NUM_THREADS=1 MLSCHED_RUN_CACHE=$$cache $(BIN)/python -m pytest -q -m reproduction tests; \
	rc=$$?; rm -rf "$$cache"; exit $$rc

lint: install
	$(BIN)/ruff check mlsched tests benchmarks scripts
	$(BIN)/ruff format --check mlsched tests benchmarks scripts
	$(BIN)/mypy mlsched benchmarks scripts

# Plants each bug listed in scripts/mutation_check.py in a copy of the tree; the fast tests
# named beside it must fail (docs/testing.md).
mutation: install
	OMP_NUM_THREADS=1 $(BIN)/python scripts/mutation_check.py

bench: install
	OMP_NUM_THREADS=1 $(BIN)/python -m benchmarks
	OMP_NUM_THREADS=1 $(BIN)/python -m benchmarks.gavel_trace
	OMP_NUM_THREADS=1 $(BIN)/python -m benchmarks.philly_scale
	OMP_NUM_THREADS=1 $(BIN)/python -m benchmarks.hetero_round
	OMP_NUM_THREADS=1 $(BIN)/python -m benchmarks.gadget_slot

# Optional: Horovod 0.28.1 (PyTorch + Gloo, CPU) built from its sdist patched to C++17 (the
# release asks for C++14, which torch >= 2.1 headers reject). Nothing else needs it.
horovod: install
	bash scripts/build_horovod.sh $(VENV)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
