#!/usr/bin/env bash
# Configures and builds trainbench. Usage: scripts/build.sh BUILD_DIR [extra cmake arguments]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$1"
shift
launcher=()
if command -v ccache > /dev/null; then
  # A compiler cache that hits from a fresh clone in another folder: paths below the source
  # tree are hashed relative to it, the compiler is checked by content, not by its mtime.
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true CCACHE_COMPILERCHECK=content
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@"
cmake --build "$build" --parallel "$(nproc)"
