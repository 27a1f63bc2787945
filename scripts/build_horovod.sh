#!/usr/bin/env bash
# Build Horovod 0.28.1 (PyTorch + Gloo, CPU, no MPI) from its sdist into the project's venv.
#
# Why a patch: Horovod 0.28.1 (the latest release) sets CMAKE_CXX_STANDARD 14, but the
# headers of torch >= 2.1 need C++17, so the released sdist fails to compile its torch
# extension. We download the sdist, switch both CMakeLists.txt files to C++17 and build it
# without build isolation (so it compiles against the venv's torch). Idempotent: nothing is
# done when `import horovod.torch` already works. Called by `make horovod`.
#
# Usage: scripts/build_horovod.sh [VENV]   (default: .venv next to this script's parent)
set -euo pipefail

HOROVOD_VERSION="${HOROVOD_VERSION:-0.28.1}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "build_horovod: no virtualenv at $VENV (run \`make install\` first)" >&2
    exit 1
fi
VENV="$(cd "$VENV" && pwd)"  # absolute: the build runs in a temporary directory
PY="$VENV/bin/python"
PIP="$VENV/bin/pip"

if "$PY" -c "import horovod.torch" >/dev/null 2>&1; then
    echo "build_horovod: horovod.torch already imports ($("$PY" -c 'import horovod; print(horovod.__version__)')); nothing to do"
    exit 0
fi

for tool in cmake g++ make; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build_horovod: '$tool' is needed to compile Horovod and was not found" >&2
        exit 1
    fi
done

# What Horovod's setup.py imports or installs at build/run time; with --no-build-isolation
# they must already be in the venv.
"$PIP" install -q setuptools wheel packaging cloudpickle psutil pyyaml

WORK="$(mktemp -d -t horovod-build.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

echo "build_horovod: downloading the horovod==$HOROVOD_VERSION sdist"
"$PIP" download -q --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$WORK"
tar -xzf "horovod-$HOROVOD_VERSION.tar.gz"
SRC="$WORK/horovod-$HOROVOD_VERSION"

echo "build_horovod: patching C++14 -> C++17 (torch >= 2.1 headers need C++17)"
for f in "$SRC/CMakeLists.txt" "$SRC/horovod/torch/CMakeLists.txt"; do
    if ! grep -q 'CMAKE_CXX_STANDARD 14' "$f"; then
        echo "build_horovod: expected 'CMAKE_CXX_STANDARD 14' in $f; the sdist changed" >&2
        exit 1
    fi
    sed -i 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 17/' "$f"
done

# The release builds RelWithDebInfo (-O3 -g); the same -O3 without debug information
# (Release) compiles in about 70 % of the time on 2 cores, and nothing here debugs Horovod.
echo "build_horovod: building Release (-O3, no debug information)"
if ! grep -q "else 'RelWithDebInfo'" "$SRC/setup.py"; then
    echo "build_horovod: expected the RelWithDebInfo build type in $SRC/setup.py; the sdist changed" >&2
    exit 1
fi
sed -i "s/else 'RelWithDebInfo'/else 'Release'/" "$SRC/setup.py"

echo "build_horovod: compiling (a few minutes)"
HOROVOD_WITH_PYTORCH=1 \
HOROVOD_WITH_GLOO=1 \
HOROVOD_WITHOUT_MPI=1 \
HOROVOD_WITHOUT_TENSORFLOW=1 \
HOROVOD_WITHOUT_MXNET=1 \
HOROVOD_CPU_OPERATIONS=gloo \
MAKEFLAGS="-j$(nproc)" \
"$PIP" install --no-build-isolation --no-deps --no-cache-dir "$SRC"

# Runtime dependencies of horovod (declared by its setup.py; --no-deps above avoids letting
# pip touch the pinned torch).
"$PIP" install -q cloudpickle psutil pyyaml packaging

"$PY" -c "import horovod.torch as hvd; print('build_horovod: horovod', __import__('horovod').__version__, 'with torch extension OK')"
"$VENV/bin/horovodrun" --version
