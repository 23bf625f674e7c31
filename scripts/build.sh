#!/usr/bin/env bash
# Configures (once) and builds everything into build/ with CMake + Ninja.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${NEURONCC_BUILD_DIR:-$ROOT/build}"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$BUILD" -j"${NEURONCC_JOBS:-$(nproc)}"
