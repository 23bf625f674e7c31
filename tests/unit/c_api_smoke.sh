#!/bin/sh
# Builds c_api_smoke.c exactly as an application would (the compiler, the
# public include directory, -lnrt -pthread) and runs it against a test NEFF.
# Usage: c_api_smoke.sh CC SOURCE INCLUDE_DIR LIB_DIR NEFF WORK_DIR
set -eu
cc="$1"; src="$2"; inc="$3"; lib="$4"; neff="$5"; work="$6"
mkdir -p "$work"
"$cc" -std=c99 -Wall -Wextra -Werror -pedantic "$src" -I "$inc" -L "$lib" -lnrt -pthread -o "$work/c_api_smoke"
rm -f "$work/smoke.ntff"
LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/c_api_smoke" "$neff" "$work/smoke.ntff"
