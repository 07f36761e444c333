#!/usr/bin/env bash
# Cross-compiles trainbench and its tests for another architecture and runs them under
# qemu-user: builds a Debian 12 root of that architecture holding the -dev packages
# scripts/setup.sh lists (mmdebstrap, the host's own apt sources and proxy, read by
# scripts/lib/debian_root.sh as for fresh_machine_check.sh), builds against it with Debian's
# cross compiler (cmake/toolchains/), then runs `trainbench list`, `info`, a small GEMM / conv
# / STREAM run and a subset of the CPU unit tests under qemu. Under emulation no time means
# anything: the check is of building, dispatch, inventory and results, and the report says
# "emulated: timings meaningless".
# Usage: scripts/cross_build_check.sh aarch64 [--build-only]
#   --build-only: the root and the cross build, nothing run (what pack_for_gpu.sh needs).
# Exit: 0 passed; 77 skipped (no root could be built: no network, no mirror, no mmdebstrap,
# no cross compiler or qemu installable); otherwise the failing step's status.
# Environment: CROSS_ROOT (default ${TMPDIR:-/var/tmp}/trainbench-cross-ARCH-root) is kept
# and reused while its package list is the same (CROSS_FRESH=1 builds it again);
# CROSS_BUILD_DIR (default build/cross-ARCH); CROSS_SOURCES=FILE uses that .sources/.list
# file instead of the host's (for testing the skip path); CROSS_TEST_FILTER replaces the
# gtest filter below.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
arch="${1:-}"
mode="${2:-}"
# shellcheck source=scripts/lib/debian_root.sh
source "$root/scripts/lib/debian_root.sh"
say() { echo "cross_build_check: $*" >&2; }
skip() {
  say "skipped: $*"
  exit 77
}
case "$arch" in
  aarch64) debian_arch=arm64 triplet=aarch64-linux-gnu qemu=qemu-aarch64 ;;
  *)
    echo "usage: scripts/cross_build_check.sh aarch64 [--build-only]" >&2
    exit 2
    ;;
esac
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || skip "not root and no sudo"
  sudo="sudo"
fi

# What the build needs from the target's archive: scripts/setup.sh's -dev packages (the build
# tools run on the host), and the C / C++ runtime the cross compiler links against.
packages=(libc6-dev libstdc++-12-dev libgcc-12-dev libdnnl-dev ocl-icd-opencl-dev
  libopenblas-openmp-dev nlohmann-json3-dev libfmt-dev libcli11-dev libbenchmark-dev
  libsqlite3-dev libgtest-dev zlib1g-dev)
host_tools=("g++-$triplet:$triplet-g++" "mmdebstrap:mmdebstrap" "qemu-user:$qemu" "cmake:cmake"
  "ninja-build:ninja")
missing=()
for tool in "${host_tools[@]}"; do
  command -v "${tool#*:}" >/dev/null || missing+=("${tool%%:*}")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  { $sudo apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } ||
    skip "could not install ${missing[*]}"
fi

# ---- the root ----
sysroot="${CROSS_ROOT:-${TMPDIR:-/var/tmp}/trainbench-cross-$arch-root}"
stamp="$sysroot/.trainbench-packages"
if [ "${CROSS_FRESH:-0}" = 1 ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${packages[*]}" ]; then
  proxy="$(mktemp)"
  trap 'rm -f "$proxy"' EXIT
  debian_root_apt_settings "${CROSS_SOURCES:-}" "$proxy" || skip "no apt sources on the host"
  $sudo rm -rf --one-file-system "$sysroot"
  start=$SECONDS
  # extract: the packages and their dependencies unpacked, no maintainer script run, so no
  # emulation is needed to build the root (and none of it is meant to boot).
  $sudo mmdebstrap --mode=root --variant=extract --architectures="$debian_arch" \
    --include="$(IFS=,; echo "${packages[*]}")" "${apt_options[@]}" \
    bookworm "$sysroot" "${sources[@]}" ||
    { $sudo rm -rf --one-file-system "$sysroot"; skip "could not build a Debian 12 $debian_arch root (mmdebstrap failed, see above)"; }
  # Absolute symlinks (libz.so -> /lib/...) would resolve on the host: make them relative.
  find "$sysroot" -xdev -type l -lname '/*' ! -path "$sysroot/dev/*" | while read -r link; do
    target="$(readlink "$link")"
    $sudo ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$sysroot$target")" "$link"
  done
  echo "${packages[*]}" | $sudo tee "$stamp" >/dev/null
  say "root built in $((SECONDS - start)) s ($(du -sh "$sysroot" | cut -f1)): $sysroot"
else
  say "reusing the root $sysroot"
fi

# ---- the cross build ----
build="${CROSS_BUILD_DIR:-$root/build/cross-$arch}"
start=$SECONDS
# build.sh: Release, through ccache where installed. The root has no MPI (FindMPI would take the
# host's mpicxx); dist/ is portable C++.
bash "$root/scripts/build.sh" "$build" \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/$triplet.cmake" -DTRAINBENCH_SYSROOT="$sysroot" \
  -DTRAINBENCH_WARNINGS_AS_ERRORS=ON -DTRAINBENCH_BACKEND_ONEDNN=ON -DTRAINBENCH_BACKEND_OPENBLAS=ON \
  -DTRAINBENCH_MPI=OFF
say "cross build ($arch) in $((SECONDS - start)) s: $build"
file "$build/bench/trainbench" | grep -q "ARM aarch64" || { say "FAILED: not an $arch binary"; exit 1; }
[ "$mode" = "--build-only" ] && exit 0

# ---- under qemu-user ----
# QEMU_LD_PREFIX: the target's loader and libraries come from the root (and trainbench's
# inventory sees the variable: one of its emulation signs).
# OPENBLAS_CORETYPE and the like name the host's x86 cores: not passed on.
run() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE QEMU_LD_PREFIX="$sysroot" "$qemu" "$@"; }
out="$(mktemp -d)"
trap 'rm -rf "$out"; rm -f "${proxy:-}"' EXIT
start=$SECONDS
status=0
step() {
  local name="$1"
  shift
  local begin=$SECONDS
  if "$@" > "$out/$name.log" 2>&1; then
    say "ok     $name ($((SECONDS - begin)) s)"
  else
    status=1
    say "FAILED $name ($((SECONDS - begin)) s):"
    tail -30 "$out/$name.log" >&2
  fi
}
tb="$build/bench/trainbench"
step list run "$tb" list
step info run "$tb" info
grep -q "EMULATED  emulated: timings meaningless" "$out/info.log" ||
  { status=1; say "FAILED: info does not say it ran emulated"; cat "$out/info.log" >&2; }
sed -n '/^cpu /p; /^isa /p; /^EMULATED/p; /peak /p; /kernel\|implementation/p' "$out/info.log" | head -20 >&2
# Small cases, one repetition each: correctness and dispatch, not speed.
step run run "$tb" run -b cpu-onednn -b cpu-openblas -w 'gemm m=256' \
  -w 'conv mb=2 ic=16 ih=14 oc=16 kh=3 ph=1' -w 'stream op=triad n=1000000' \
  --min-reps 1 --max-reps 1 --warmup 0 --warmup-time 0 --time-budget 0 --min-sample-time 0 \
  -o "$out/report.json"
if [ -s "$out/report.json" ]; then
  python3 - "$out/report.json" <<'PY' >&2 || status=1
import json, sys
report = json.load(open(sys.argv[1]))
print("report host.emulation:", report["host"].get("emulation"))
assert report["host"].get("emulation", "").startswith("emulated: timings meaningless")
failed = 0
for result in report["results"]:
    print(f"  {result['backend']}: {result['workload']} -> {result['status']}"
          f" ({result.get('implementation') or result.get('reason')})")
    # unimplemented is an answer (a reference kernel, named and not timed); failed is not
    failed += result["status"] == "failed"
sys.exit(1 if failed else 0)
PY
fi
# The CPU unit tests that check what differs on Arm (parsers, peak table, ISA dispatch, the
# host inventory, the kernels' level selection, low-precision rounding, the references) and
# four of BackendOps on both CPU backends (awkward GEMM and conv shapes, STREAM, the peak
# probes: SVE fmla and bfmmla under qemu's max CPU). Each BackendOps case creates a backend,
# which measures the clock: about 40 s under qemu, so not all 20; not the training-model
# tests (hours under qemu).
filter="${CROSS_TEST_FILTER:-Cpuinfo.*:ArmCpuinfo.*:ArmFeatures.*:Emulation.*:PeakTable.*:TheoreticalPeak.*:CpuList.*:Cgroup.*:HostTree.*:IsaLevel.*:KernelSelection.*:KernelLevel*:HostInventory.*:Threading.*:Bf16.*:LowPrecision.*:Reference.*:OneDnnKernels.*:Usable/BackendOps.GemmAwkwardShapes/*:Usable/BackendOps.ConvAwkwardShapes/*:Usable/BackendOps.StreamKernels/*:Usable/BackendOps.PeakProbes/*}"
step test_backends run "$build/tests/test_backends" --gtest_brief=1 --gtest_filter="$filter"
grep -E "PASSED|FAILED|SKIPPED" "$out/test_backends.log" | head -20 >&2 || true
if [ "$status" -ne 0 ]; then
  say "FAILED under $qemu after $((SECONDS - start)) s"
  exit 1
fi
say "passed under $qemu in $((SECONDS - start)) s"
