#!/usr/bin/env bash
# Side by side, interleaved: trainbench against the same work done directly (oneDNN matmul,
# OpenBLAS sgemm, and a plain OpenMP STREAM triad, built with the same flags). Both pin one
# thread per core. OpenBLAS runs with its environment as found and with OPENBLAS_CORETYPE
# and OPENBLAS_L2_SIZE unset (trainbench's --child-env does the latter in one report).
# Usage: scripts/overhead_check.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
build="${1:-build/release}"
rounds="${2:-3}"
n_stream=$(( ${STREAM_N:-251658240} ))
export OMP_PROC_BIND=close OMP_PLACES=cores  # the baselines' pinning, as trainbench pins
for round in $(seq "$rounds"); do
  echo "--- round $round"
  "$build/bench/baselines/trainbench-baseline-onednn-gemm" 4096 4096 4096 20
  "$build/bench/trainbench" run -b cpu-onednn -w "gemm m=4096" --min-reps 20 --time-budget 0 -o /tmp/trainbench-overhead-gemm.json 2>/dev/null | tail -n 1
  if [ -x "$build/bench/baselines/trainbench-baseline-openblas-sgemm" ]; then
    "$build/bench/baselines/trainbench-baseline-openblas-sgemm" 4096 4096 4096 20
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/bench/baselines/trainbench-baseline-openblas-sgemm" 4096 4096 4096 20
    "$build/bench/trainbench" run -b cpu-openblas -w "gemm m=4096" --min-reps 20 --time-budget 0 \
      --child-env "cpu-openblas:-OPENBLAS_CORETYPE,-OPENBLAS_L2_SIZE" -o /tmp/trainbench-overhead-openblas.json \
      2>/dev/null | grep passed
  fi
  "$build/bench/baselines/trainbench-baseline-stream" "$n_stream" 20
  "$build/bench/trainbench" run -b cpu-onednn -w "stream op=triad n=$n_stream" --min-reps 20 --time-budget 0 -o /tmp/trainbench-overhead-stream.json 2>/dev/null | tail -n 1
done
