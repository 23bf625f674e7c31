#!/usr/bin/env bash
# Main job: build neuron-cc if needed, then compile, run and profile the
# bundled RMSNorm example three ways and print the tables and ratios.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
"$ROOT/scripts/build.sh"
exec /usr/bin/python3 "$ROOT/examples/rmsnorm/run_example.py"
