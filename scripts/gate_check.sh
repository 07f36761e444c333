#!/usr/bin/env bash
# The regression gate's error rates in the usual CI situation: BASELINES runs of a build, then
# TRIALS single current runs of the same build (each a false alarm if check says "slower") and
# TRIALS single runs with the slow-down shim preloaded (every cblas_sgemm takes 1 + SLOWDOWN as
# long; each caught if check says "slower"). Cases on cpu-openblas: a GEMM and a 3x3
# convolution. Prints each verdict, then the counts.
# Usage: scripts/gate_check.sh [BUILD_DIR] [BASELINES] [TRIALS] [-- extra check arguments]
set -euo pipefail
build="${1:-build/release}"
baselines="${2:-5}"
trials="${3:-20}"
shift $(($# < 3 ? $# : 3))
[ "${1:-}" = "--" ] && shift
check_args=("$@")
slowdown="${SLOWDOWN:-0.15}"
work="$(mktemp -d /tmp/trainbench-gate.XXXXXX)"
trap 'rm -rf "$work"' EXIT
trainbench="$build/bench/trainbench"
shim="$build/tests/libslowdown_shim.so"
[ -x "$trainbench" ] && [ -f "$shim" ] || {
  echo "gate_check: build $build first (trainbench and tests/libslowdown_shim.so)" >&2
  exit 2
}
cases=(-b cpu-openblas -w "gemm m=1024"
  -w "conv name=layer1.conv2 mb=16 ic=64 ih=56 oc=64 kh=3 ph=1 dir=fwd")

one_run() {  # OUT [env...]
  local out="$1"
  shift
  env "$@" "$trainbench" run "${cases[@]}" -o "$out" > /dev/null 2>&1
}

# The cases' verdicts: "slower" anywhere counts the run as flagged.
verdict() {  # CURRENT
  local code=0
  "$trainbench" check --force --baseline "$work"/base-*.json --current "$1" --format json \
    "${check_args[@]}" > "$work/verdict.json" 2> /dev/null || code=$?
  python3 - "$work/verdict.json" "$code" << 'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
rows = doc.get("cases", doc.get("comparisons", []))
verdicts = [row.get("verdict", "?") for row in rows]
notes = [row.get("comparison", {}).get("note", "") for row in rows]
print(("slower" if any(v == "slower" for v in verdicts) else "not-slower"),
      "exit", sys.argv[2], "; ".join(f"{v} ({n})" if n else v for v, n in zip(verdicts, notes)))
EOF
}

for i in $(seq "$baselines"); do one_run "$work/base-$i.json"; done
false_alarms=0
caught=0
for i in $(seq "$trials"); do
  # Alternated, so a drift of the machine falls on both kinds of run alike.
  one_run "$work/same.json"
  same="$(verdict "$work/same.json")"
  one_run "$work/slow.json" LD_PRELOAD="$shim" TRAINBENCH_SLOWDOWN="$slowdown"
  slow="$(verdict "$work/slow.json")"
  echo "trial $i: same: $same | slowed: $slow"
  [[ "$same" == slower* ]] && false_alarms=$((false_alarms + 1))
  [[ "$slow" == slower* ]] && caught=$((caught + 1))
done
echo "false alarms: $false_alarms of $trials identical runs; slow-down of $slowdown caught: $caught of $trials"
