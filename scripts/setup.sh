#!/usr/bin/env bash
# Installs every Debian package the build and the tests need. Idempotent: when
# everything is already present it only runs dpkg queries and exits.
set -euo pipefail
PACKAGES=(
  cmake ninja-build g++ ccache
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools clang-19 libclang-rt-19-dev
  libprotobuf-dev protobuf-compiler libabsl-dev libgtest-dev libssl-dev libsleef-dev
  libopenblas0-pthread
  python3-torch python3-numpy python3-protobuf
  chromium python3-pil valgrind
  zlib1g-dev libzstd-dev libedit-dev libcurl4-openssl-dev libxml2-dev
)
missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
