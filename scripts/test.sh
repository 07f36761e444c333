#!/usr/bin/env bash
# Installs the dependencies, builds and runs the whole test suite (ctest).
# --sanitize builds and tests with AddressSanitizer + UndefinedBehaviorSanitizer instead.
# Arguments after -- go to ctest (e.g. -- -LE slow).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/release"
extra=()
ctest_args=()
sanitize=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) sanitize=1 ;;
    --)
      shift
      ctest_args=("$@")
      break
      ;;
    *)
      echo "usage: scripts/test.sh [--sanitize] [-- CTEST_ARGS...]" >&2
      exit 2
      ;;
  esac
  shift
done
if [ "$sanitize" = 1 ]; then
  build="$root/build/sanitize"
  # -g1: line tables, all a sanitizer's report needs (full -g compiled report_commands.cpp 1.4x
  # as long here, the whole build about 7% longer).
  extra=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
    -DTRAINBENCH_SANITIZE=address,undefined)
  export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
  # Open MPI keeps what MPI_Init allocates; the tests under mpiexec unwind fully so these match.
  export LSAN_OPTIONS="suppressions=$root/scripts/lsan_openmpi.supp:${LSAN_OPTIONS:-}"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
fi
bash "$root/scripts/setup.sh" --test
# BUILD_TESTING=ON: a build folder that scripts/bench.sh configured without the tests gets them.
bash "$root/scripts/build.sh" "$build" -DTRAINBENCH_WARNINGS_AS_ERRORS=ON -DBUILD_TESTING=ON \
  "${extra[@]}"
cd "$build"
# A selection that matches no test is an error, not a pass.
ctest --output-on-failure --no-tests=error --timeout 900 -j 2 "${ctest_args[@]}"
