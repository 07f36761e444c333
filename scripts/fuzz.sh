#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz: clang, ASan + UBSan, -DTRAINBENCH_FUZZ=ON) and runs
# each for SECONDS (default 60) from its seed corpus, new inputs kept in the build folder. Prints
# each harness's executions, coverage (edges) and crashes, and fails on any crash, its input
# left in BUILD/artifacts/<harness>/ (fix it, then add it to tests/fuzz/corpus/<harness>/).
# Usage: scripts/fuzz.sh [SECONDS] [HARNESS...]   (harnesses: descriptor report data options history)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(descriptor report data options history)
build="${TRAINBENCH_FUZZ_BUILD:-$root/build/fuzz}"
if ! command -v clang++ > /dev/null; then
  echo "fuzz.sh: clang++ is not installed (scripts/setup.sh --test installs it)" >&2
  exit 1
fi
launcher=()
if command -v ccache > /dev/null; then
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true CCACHE_COMPILERCHECK=content
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
mkdir -p "$build"
# No CUDA (nvcc's host compiler is g++) and no tests: the harnesses need the readers only.
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTRAINBENCH_SANITIZE=address,undefined -DTRAINBENCH_FUZZ=ON -DTRAINBENCH_BACKEND_CUDA=OFF \
  -DBUILD_TESTING=OFF "${launcher[@]}" > "$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
targets=()
for harness in "${harnesses[@]}"; do targets+=("fuzz_$harness"); done
cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}"

# Open MPI's own leaks (scripts/lsan_openmpi.supp); a report's own seeds are the test fixtures.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan_openmpi.supp"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export OMP_NUM_THREADS=1
status=0
rows=()
for harness in "${harnesses[@]}"; do
  corpus="$build/corpus/$harness" artifacts="$build/artifacts/$harness"
  rm -rf "$artifacts"
  mkdir -p "$corpus" "$artifacts"
  # Seeds: the harness's corpus folder (git keeps none empty) and, for reports, the test fixtures.
  seeds=()
  [ ! -d "$root/tests/fuzz/corpus/$harness" ] || seeds+=("$root/tests/fuzz/corpus/$harness")
  [ "$harness" != report ] || seeds+=("$root/tests/reports/data")
  log="$build/$harness.log"
  outcome=0
  (cd "$build" && "$build/tests/fuzz/fuzz_$harness" -max_total_time="$seconds" -print_final_stats=1 \
    -rss_limit_mb=4096 -malloc_limit_mb=4096 -timeout=60 -close_fd_mask=3 \
    -artifact_prefix="$artifacts/" "$corpus" "${seeds[@]}") > "$log" 2>&1 || outcome=$?
  # A harness that stopped before fuzzing (say, a missing folder) prints no figures: '?'.
  executions=$(awk '/stat::number_of_executed_units/ { print $2 }' "$log" | tail -1 || true)
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{ print $2 }' || true)
  crashes=$(find "$artifacts" -type f | wc -l)
  rows+=("$(printf '%-12s %12s %8s %8s' "$harness" "${executions:-?}" "${edges:-?}" "$crashes")")
  if [ "$outcome" -ne 0 ] || [ "$crashes" -gt 0 ]; then
    status=1
    echo "fuzz.sh: fuzz_$harness found a crash or could not run (exit $outcome); its log ends:" >&2
    tail -40 "$log" >&2
  fi
done
echo "fuzzers, $seconds s each (ASan + UBSan):"
printf '%-12s %12s %8s %8s\n' harness executions edges crashes
for row in "${rows[@]}"; do echo "$row"; done
exit "$status"
