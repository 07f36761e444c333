#!/usr/bin/env bash
# Installs what trainbench builds with, from Debian 12 or 13 packages (the same names on both).
# Run as root (or with sudo).
# Usage: scripts/setup.sh [--test | --pytorch]
set -euo pipefail
packages=(
  g++ cmake ninja-build git pkg-config
  ccache               # builds compile only what changed, also from another clone (scripts/build.sh)
  libdnnl-dev          # oneDNN 2.6: the cpu-onednn backend
  # Debian built libdnnl-dev with the OpenCL GPU runtime, so its CMake package
  # (dnnl-config.cmake) does find_package(OpenCL REQUIRED); the package only recommends it.
  ocl-icd-opencl-dev
  libopenblas-openmp-dev  # OpenBLAS, OpenMP variant: the cpu-openblas backend (shares oneDNN's pool)
  nlohmann-json3-dev   # reports
  libfmt-dev           # formatting
  libcli11-dev         # command line
  libbenchmark-dev     # Google Benchmark's JSON reporter (--format gbench)
  libsqlite3-dev       # trainbench history
  libgtest-dev         # tests
  openmpi-bin libopenmpi-dev  # Open MPI: runs across ranks (mpirun / srun), the CPU collectives
  zlib1g-dev           # gzip-compressed dataset files
  dataset-fashion-mnist  # time-to-train on real data (ttt-fashion-mnist)
  wordnet-base         # English text (WordNet's glosses) for the masked-LM time-to-train (ttt-mlm)
)
# --test: also what the tests need beyond the build: a headless browser for the HTML report,
# PyTorch (Debian's CPU build) for the tests that compare a training step with it, and clang
# with its OpenMP and sanitizer/libFuzzer runtimes for the fuzzers (scripts/fuzz.sh), and
# iproute2, nftables and procps for the hosts that scripts/netns_cluster.sh makes.
# --pytorch: PyTorch and jemalloc for scripts/pytorch_reference.py's side-by-side figures.
case "${1:-}" in
  --test) packages+=(chromium python3-torch python3-torchvision clang libomp-dev libclang-rt-dev
    iproute2 nftables procps) ;;
  --pytorch) packages+=(python3-torch python3-torchvision libjemalloc2) ;;
esac
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
