#!/usr/bin/env bash
# What Debian 13 changes on this CPU, measured side by side in one run.
#   versions: the same cases built on this Debian 12 machine (oneDNN 2.6) and in a Debian 13 root
#     (oneDNN 3.7, its binary run in the root on the same CPU), alternated ABBA by `trainbench
#     ab`, at the host's ISA and, where the host has more, capped to AVX2.
#   pytorch: the root's trainbench against the root's PyTorch 2.6 (setup.sh --pytorch inside it),
#     ResNet-50 batch 32 and BERT-base batch 8 in f32 and bf16, PyTorch in both memory formats,
#     the two sides alternated round by round; OUT_DIR/pytorch.md has scripts/peer_ratios.py's table.
# Usage: scripts/debian13_figures.sh [--root DIR] [--rounds N] versions|pytorch OUT_DIR
#   --root DIR: a Debian 13 root holding a built clone at /trainbench (as KEEP_ROOT=1
#     scripts/fresh_machine_check.sh --release trixie leaves one); without it one is built and kept.
# OUT_DIR gets every report and the tables (versions-CAP.md). Run as root (chroot).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="" rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="$2" && shift 2 ;;
    --rounds) rounds="$2" && shift 2 ;;
    *) break ;;
  esac
done
what="${1:?usage: debian13_figures.sh [--root DIR] [--rounds N] versions|pytorch OUT_DIR}"
out="$(mkdir -p "${2:?OUT_DIR}" && cd "$2" && pwd)"
say() { echo "debian13_figures: $*" >&2; }

host_bin="$repo/build/release/bench/trainbench"
bash "$repo/scripts/build.sh" "$repo/build/release" > "$out/host-build.log"
if [ -z "$root" ]; then
  say "building a Debian 13 root with trainbench (kept)"
  KEEP_ROOT=1 bash "$repo/scripts/fresh_machine_check.sh" --release trixie \
    'bash scripts/setup.sh && bash scripts/build.sh build/release' 2>&1 |
    tee "$out/root-build.log"
  root="$(sed -n 's/^fresh_machine_check: kept the root at //p' "$out/root-build.log" | tail -1)"
fi
[ -x "$root/trainbench/build/release/bench/trainbench" ] ||
  { say "$root holds no built /trainbench/build/release/bench/trainbench" && exit 2; }

# in_root COMMAND...: COMMAND in the root, in a mount and PID namespace of its own, with OUT_DIR
# mounted at the same path (so paths given to it hold on both sides) and this environment.
cat > "$out/in_root" << EOF
#!/bin/sh
exec unshare --mount --pid --fork --kill-child -- sh -c '
  r="\$0"; o="\$1"; shift
  mount -t proc proc "\$r/proc" && mount --rbind /sys "\$r/sys" && mount --rbind /dev "\$r/dev" &&
    mkdir -p "\$r\$o" && mount --bind "\$o" "\$r\$o" && cd "\$r\$o" && exec chroot "\$r" "\$@"
' "$root" "$out" "\$@"
EOF
printf '#!/bin/sh\nexec "%s" /trainbench/build/release/bench/trainbench "$@"\n' "$out/in_root" \
  > "$out/trainbench-debian13"
chmod +x "$out/in_root" "$out/trainbench-debian13"

versions() {
  local caps=(host) conv3x3='conv name=layer1.conv2 mb=32 ic=64 ih=56 oc=64 kh=3 ph=1'
  # ResNet-50's 3x3 convolution in its three directions, and the 1x1 stride-2 downsample's
  # backward-data, which oneDNN 3.7 divides by zero on a CPU whose caches it reads as empty.
  grep -qw avx512f /proc/cpuinfo && caps+=(avx2)
  for cap in "${caps[@]}"; do
    local env=()
    [ "$cap" = host ] || env=(ONEDNN_MAX_CPU_ISA=AVX2 TRAINBENCH_MAX_ISA=avx2)
    say "versions at $cap: $rounds rounds each of Debian 12 (A) and Debian 13 (B)"
    env "${env[@]}" "$host_bin" ab --baseline-bin "$host_bin" --current-bin "$out/trainbench-debian13" \
      --rounds "$rounds" --out-dir "$out/versions-$cap" --ab-format markdown \
      -b cpu-onednn --warmup 1 --min-reps 3 --max-reps 5 \
      -w 'gemm m=4096 n=4096 k=4096 dtype=f32' -w 'gemm m=4096 n=4096 k=4096 dtype=bf16' \
      -w "$conv3x3 dir=fwd" -w "$conv3x3 dir=bwd_data" -w "$conv3x3 dir=bwd_weights" \
      -w 'conv name=layer3.0.downsample mb=32 ic=512 ih=28 oc=1024 kh=1 sh=2 dir=bwd_data' \
      -w 'resnet50-train batch=32 dtype=f32' -w 'resnet50-train batch=32 dtype=bf16' \
      -w 'bert-train batch=8 seq=128 dtype=f32' -w 'bert-train batch=8 seq=128 dtype=bf16' \
      | tee "$out/versions-$cap.md" || true  # a library change does not fail; a lost case does
    "$host_bin" compare "$out/versions-$cap/baseline-combined.json" \
      "$out/versions-$cap/current-combined.json" --format markdown | tee -a "$out/versions-$cap.md"
  done
}

# One side of a pytorch round: trainbench's four cases in one run, or PyTorch's, one report each.
trainbench_side() {
  "$out/trainbench-debian13" run -b cpu-onednn --warmup 1 --min-reps 3 --max-reps 5 \
    -w 'resnet50-train batch=32 dtype=f32' -w 'resnet50-train batch=32 dtype=bf16' \
    -w 'bert-train batch=8 seq=128 dtype=f32' -w 'bert-train batch=8 seq=128 dtype=bf16' \
    -o "$out/pytorch/round-$1-trainbench.json" || true  # a failed case is in the report
}
# trainbench_passed MODEL DTYPE: round 1's trainbench case passed (no ratio without it, and
# PyTorch's bf16 without the CPU's bf16 instructions takes many times as long).
trainbench_passed() {
  python3 - "$out/pytorch/round-1-trainbench.json" "$1-train" "$2" << 'EOF'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
sys.exit(not any(r["workload"].startswith(sys.argv[2] + " ") and r["dtype"] == sys.argv[3]
                 and r["status"] == "passed" for r in results))
EOF
}
pytorch_side() {
  local model dtype
  for model in resnet50 bert; do
    for dtype in f32 bf16; do
      trainbench_passed "$model" "$dtype" ||
        { say "PyTorch $model $dtype not run: trainbench's case did not pass" && continue; }
      "$out/in_root" env LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 \
        python3 "$out/pytorch_reference.py" "$model" --threads "$(nproc)" --dtype "$dtype" \
        -o "$out/pytorch/round-$1-pytorch-$model-$dtype.json" || true
    done
  done
}

pytorch() {
  "$out/in_root" python3 -c 'import torch' ||
    { say "no PyTorch in $root: run bash scripts/setup.sh --pytorch inside it" && exit 2; }
  mkdir -p "$out/pytorch" && cp "$repo/scripts/pytorch_reference.py" "$out/"
  local round
  for round in $(seq 1 "$rounds"); do  # ABBA: trainbench first in odd rounds
    say "pytorch round $round of $rounds"
    if [ $((round % 2)) = 1 ]; then trainbench_side "$round" && pytorch_side "$round"
    else pytorch_side "$round" && trainbench_side "$round"; fi  # round 1 is trainbench's first
  done
  python3 "$repo/scripts/peer_ratios.py" "$out/pytorch" | tee "$out/pytorch.md"
}

case "$what" in
  versions) versions ;;
  pytorch) pytorch ;;
  *) say "unknown: $what (versions or pytorch)" && exit 2 ;;
esac
