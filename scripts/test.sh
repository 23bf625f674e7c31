#!/usr/bin/env bash
# Builds everything and runs the whole test suite through ctest: lit, the
# GoogleTest unit tests (a second copy under AddressSanitizer) and the
# end-to-end tests against PyTorch eager.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${NEURONCC_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh"
cd "$BUILD"
ctest --output-on-failure -j"${NEURONCC_TEST_JOBS:-2}"
