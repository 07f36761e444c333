#!/usr/bin/env bash
# Runs the quick suite on cpu-onednn at the host's own ISA and capped to AVX2 (oneDNN's
# dispatcher and trainbench's own kernels), as a Zen 2/3 machine would run it, and fails when
# the capped run takes more than twice as long: the sign of reference kernels or a layout the
# AVX2 kernels do not take. Usage: scripts/isa_suite_check.sh BUILD_DIR [OUT_DIR]
set -euo pipefail
build="$1"
out="${2:-$(mktemp -d)}"
mkdir -p "$out"
trainbench="$build/bench/trainbench"
run_suite() {  # label, then environment assignments
  local label="$1"
  shift
  local start=$SECONDS
  if ! env "$@" "$trainbench" run -b cpu-onednn -o "$out/quick-$label.json" >"$out/quick-$label.txt"; then
    echo "isa_suite_check: FAILED: the quick suite ($label) did not pass:" >&2
    grep -A1 -E "failed|skipped" "$out/quick-$label.txt" >&2 || true
    return 1
  fi
  echo $((SECONDS - start))
}
host_s=$(run_suite host) || exit 1
avx2_s=$(run_suite avx2 ONEDNN_MAX_CPU_ISA=AVX2 TRAINBENCH_MAX_ISA=avx2) || exit 1
echo "isa_suite_check: quick suite on cpu-onednn: ${host_s} s at the host's ISA, ${avx2_s} s at AVX2"
if grep -q "reference kernels" "$out/quick-avx2.txt" "$out/quick-host.txt"; then
  echo "isa_suite_check: FAILED: a case would run reference kernels" >&2
  grep -h -B1 "reference kernels" "$out"/quick-*.txt >&2
  exit 1
fi
if [ "$avx2_s" -gt $((2 * host_s + 5)) ]; then  # 5 s: start-up and noise on short suites
  echo "isa_suite_check: FAILED: the AVX2 run took more than twice the host's" >&2
  exit 1
fi
