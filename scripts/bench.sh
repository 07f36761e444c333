#!/usr/bin/env bash
# Installs the dependencies, builds in Release and runs the default suite: prints a results
# table and writes a JSON report. Extra arguments go to `trainbench run`
# (e.g. --suite full, --backend cpu-onednn, -w 'gemm m=4096', -o report.json).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" "$root/build/release" -DBUILD_TESTING=OFF
exec "$root/build/release/bench/trainbench" run "$@"
