#!/usr/bin/env bash
# GPU acceptance check (scripts/gpu_check.py): NVML, a CUDA run of each trainer kind, and the
# local testbed training CUDA jobs to done. Runs with the machine's own CUDA torch: no venv,
# no network. Wheels in .whl/ (grpcio, protobuf, grpcio-health-checking of the versions the
# stubs need) are installed into a scratch directory first when present; the gRPC stubs are
# generated when grpc_tools imports, else those in mlsched/v1 are used as they are.
#
#   bash scripts/gpu_check.sh [OUT_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/runs/gpu-check}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
cd "$ROOT"
if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/mlsched-gpu-site .whl/*.whl
    export PYTHONPATH="/tmp/mlsched-gpu-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if "$PY" -c "import grpc_tools" 2>/dev/null; then
    "$PY" -m grpc_tools.protoc -I protos --python_out=. --grpc_python_out=. --pyi_out=. \
        protos/mlsched/v1/*.proto
elif [ ! -f mlsched/v1/agent_pb2.py ]; then
    echo "gpu_check: no gRPC stubs in mlsched/v1 and grpc_tools missing (run make protos and carry them)" >&2
    exit 2
fi
nvidia-smi || true
# The suite's own GPU tests (skipped with their reason where no GPU can be used).
"$PY" -m pytest -q -p no:cacheprovider -o addopts="" -rs \
    "tests/test_trainers_ddp.py::test_ddp_trains_on_cuda_over_nccl" \
    "tests/test_agent.py::test_a_task_with_gpu_indices_trains_on_its_gpu" \
    2>&1 | tee "$OUT/gpu_tests.log" || true
"$PY" scripts/gpu_check.py --out "$OUT" 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
