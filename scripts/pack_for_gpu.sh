#!/usr/bin/env bash
# Packs a build for a GPU machine that has CUDA (or PyTorch's CUDA wheels) but no package
# manager: trainbench, the GPU test programs and every shared library they need except glibc
# (the target's own, newer one is used) and the CUDA / NVIDIA libraries (found there), and the
# time-to-train datasets.
# Usage: scripts/pack_for_gpu.sh [--arch x86_64|aarch64] [BUILD_DIR] [OUT.tar.xz]
#   --arch: the GPU machine's CPU (default this one's). Another architecture than this one's
#   (aarch64 for a Grace host) packs the cross build scripts/cross_build_check.sh makes
#   (default BUILD_DIR build/cross-ARCH, built if it has no trainbench; OUT
#   trainbench-gpu-ARCH.tar.xz), its libraries taken from that build's Debian root. A cross
#   build has no CUDA backend (Debian has no arm64 CUDA toolkit to build against): that
#   archive runs the CPU backends on the GPU machine's CPU.
# On the GPU machine: tar xJf OUT.tar.xz && trainbench-gpu/run.sh [trainbench arguments]
#                 or: trainbench-gpu/run.sh check   (GPU tests, then the quick suite on every backend)
#                 or: trainbench-gpu/run.sh tests   (the GPU tests alone)
#                 or: trainbench-gpu/run.sh exec test_cuda --gtest_filter='Cudnn*'   (one program)
#                 or: trainbench-gpu/run.sh budget OUT [BACKEND]   (one lease's checks, about 10 min,
#                     each part under its own timeout, at most 8 files, all under OUT: the cuda
#                     tests, attention planned alone with cuDNN's log, a GEMM k-sweep, ResNet-50 and
#                     BERT-large bf16 steps with their stage seconds, their PyTorch peers, nvidia-smi;
#                     BACKEND cpu-onednn rehearses it on a CPU at small sizes)
#                 or: trainbench-gpu/run.sh gpu -o gpu.json   (the GPU suite, then the PyTorch peers:
#                     torch.matmul per dtype, the device copy, ResNet-50 and BERT-large steps
#                     under bf16 AMP, Fashion-MNIST time-to-train in f32 and bf16)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
arch="$(uname -m)"
if [ "${1:-}" = "--arch" ]; then
  arch="${2:?--arch needs x86_64 or aarch64}"
  shift 2
fi
case "$arch" in
  x86_64 | aarch64) ;;
  *)
    echo "pack_for_gpu: unknown architecture '$arch' (x86_64 or aarch64)" >&2
    exit 2
    ;;
esac
cross=0
[ "$arch" = "$(uname -m)" ] || cross=1
if [ "$cross" = 1 ]; then
  build="${1:-$root/build/cross-$arch}"
  out="${2:-$root/trainbench-gpu-$arch.tar.xz}"
  if [ ! -x "$build/bench/trainbench" ]; then
    CROSS_BUILD_DIR="$build" bash "$root/scripts/cross_build_check.sh" "$arch" --build-only
  fi
  sysroot="$(sed -n 's/^TRAINBENCH_SYSROOT:[A-Z]*=//p' "$build/CMakeCache.txt")"
  [ -d "$sysroot" ] || {
    echo "pack_for_gpu: the root $build was built against ($sysroot) is gone: run scripts/cross_build_check.sh $arch --build-only" >&2
    exit 1
  }
else
  build="${1:-$root/build/release}"
  out="${2:-$root/trainbench-gpu.tar.xz}"
fi
# The shared libraries a program needs, as paths on this machine: ldd for this architecture;
# for another, its NEEDED entries resolved (recursively) in the root, as the target's loader
# would (RUNPATH, then the multiarch directories).
needed_libraries() {
  if [ "$cross" = 0 ]; then
    ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
    return
  fi
  local triplet="$arch-linux-gnu" queue=("$1") seen=" " file name dir found
  while [ ${#queue[@]} -gt 0 ]; do
    file="${queue[0]}"
    queue=("${queue[@]:1}")
    local dirs=()
    for dir in $("$triplet-readelf" -d "$file" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p; s/.*(RPATH).*\[\(.*\)\]/\1/p' | tr ':' ' '); do
      dirs+=("$sysroot$dir")
    done
    dirs+=("$sysroot/lib/$triplet" "$sysroot/usr/lib/$triplet")
    for name in $("$triplet-readelf" -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      case "$seen" in *" $name "*) continue ;; esac
      seen="$seen$name "
      found=""
      for dir in "${dirs[@]}"; do
        [ -e "$dir/$name" ] && { found="$dir/$name"; break; }
      done
      [ -n "$found" ] || { echo "pack_for_gpu: $name (needed by $file) is not in $sysroot" >&2; continue; }
      echo "$found"
      queue+=("$(readlink -f "$found")")
    done
  done
}
stage="$(mktemp -d)/trainbench-gpu"
mkdir -p "$stage/bin" "$stage/lib"
programs=("$build/bench/trainbench")
for test in test_cuda test_backends test_models; do  # the GPU tests: kernels, ops, training steps
  [ -x "$build/tests/$test" ] && programs+=("$build/tests/$test")
done
cp "${programs[@]}" "$stage/bin/"
cp "$root/scripts/pytorch_reference.py" "$stage/"  # the PyTorch peer, run with the machine's torch
# The time-to-train datasets, which the GPU machine cannot install: Fashion-MNIST's IDX files
# and WordNet's data files (run.sh points trainbench and the PyTorch peer at these copies).
if [ -d /usr/share/datasets/fashion-mnist ]; then
  mkdir -p "$stage/data/fashion-mnist"
  cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$stage/data/fashion-mnist/"
fi
if [ -d /usr/share/wordnet ]; then
  mkdir -p "$stage/data/wordnet"
  cp /usr/share/wordnet/data.noun /usr/share/wordnet/data.verb /usr/share/wordnet/data.adj \
    /usr/share/wordnet/data.adv "$stage/data/wordnet/"
fi
for program in "${programs[@]}"; do needed_libraries "$program"; done | sort -u |
  while read -r library; do
    case "$(basename "$library")" in
      libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux*) ;;     # the target's glibc
      libcuda.so* | libcudart* | libcublas* | libcudnn* | libnvidia* | libnccl*) ;;     # found on the target
      *) cp -L "$library" "$stage/lib/" ;;
    esac
  done
cat > "$stage/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the packed trainbench with its bundled libraries and the machine's CUDA libraries.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cuda_dirs=""
for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64; do
  [ -d "$dir" ] && cuda_dirs="$cuda_dirs:$dir"
done
# PyTorch's CUDA wheels (nvidia-cublas, nvidia-cuda-runtime, ...) carry the libraries too.
python_site="$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)"
for site_dir in $python_site; do
  for dir in "$site_dir"/nvidia/*/lib "$site_dir"/nvidia/cu*/lib; do
    [ -d "$dir" ] && cuda_dirs="$cuda_dirs:$dir"
  done
done
export LD_LIBRARY_PATH="$here/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The packed datasets, unless the machine has them installed or the caller names others.
if [ -d "$here/data/fashion-mnist" ] && [ ! -d /usr/share/datasets/fashion-mnist ]; then
  export TRAINBENCH_FASHION_MNIST_DIR="${TRAINBENCH_FASHION_MNIST_DIR:-$here/data/fashion-mnist}"
fi
if [ -d "$here/data/wordnet" ] && [ ! -d /usr/share/wordnet ]; then
  export TRAINBENCH_WORDNET_DIR="${TRAINBENCH_WORDNET_DIR:-$here/data/wordnet}"
fi
if [ "${1:-}" = "check" ] || [ "${1:-}" = "tests" ]; then  # every part runs; the exit status says whether all passed
  mode="$1"
  shift
  status=0
  [ -x "$here/bin/test_cuda" ] && { "$here/bin/test_cuda" --gtest_brief=1 || status=$?; }
  # Every op on cuda (the backends' shared op tests) and the backends' agreement.
  [ -x "$here/bin/test_backends" ] && { "$here/bin/test_backends" --gtest_brief=1 \
    --gtest_filter='*/cuda:Agreement.*' || status=$?; }
  # The model tests that run on cuda: steps op by op and against f64, the backends' agreement,
  # both layouts, fused attention (the CPU-only ones need Debian's data packages).
  [ -x "$here/bin/test_models" ] && { "$here/bin/test_models" --gtest_brief=1 \
    --gtest_filter='Backends/*/2:CudaLayouts.*:BackendAgreement.*:BertBackendAgreement.*:BertFusedAttention.Cuda*:AttentionGemm.*' ||
    status=$?; }
  [ "$mode" = "tests" ] || "$here/bin/trainbench" run --suite quick "$@" || status=$?
  exit "$status"
fi
if [ "${1:-}" = "gpu" ]; then  # the GPU suite, then torch.matmul on the same GEMMs
  shift
  status=0
  "$here/bin/trainbench" run -b cuda --suite gpu "$@" || status=$?
  for dtype in f32 tf32 bf16 f16; do
    python3 "$here/pytorch_reference.py" matmul --cuda --m 8192 --dtype "$dtype" \
      -o "pytorch-matmul-$dtype.json" || status=$?
  done
  python3 "$here/pytorch_reference.py" copy --cuda -o pytorch-copy.json || status=$?
  # ResNet-50 and BERT-large steps under AMP, as the suite's bf16 cases (eager mode).
  python3 "$here/pytorch_reference.py" resnet50 --cuda --batch 256 --dtype bf16 --steps 10 \
    --warmup 3 -o pytorch-resnet50-bf16.json || status=$?
  for attention in unfused fused; do
    python3 "$here/pytorch_reference.py" bert --cuda --model large --batch 32 --seq 128 \
      --dtype bf16 --attention "$attention" --steps 10 --warmup 3 \
      -o "pytorch-bert-large-bf16-$attention.json" || status=$?
  done
  for dtype in f32 bf16; do  # the time-to-train peers of the suite's ttt-fashion-mnist cases
    python3 "$here/pytorch_reference.py" fashion-mnist --cuda --dtype "$dtype" \
      -o "pytorch-fashion-mnist-$dtype.json" || status=$?
  done
  exit "$status"
fi
if [ "${1:-}" = "budget" ]; then  # budget OUT [BACKEND]: one device lease's checks, each timed out
  out="${2:?budget needs an output folder}"
  backend="${3:-cuda}"  # another backend rehearses the script on a CPU, at small sizes
  mkdir -p "$out"
  log="$out/budget.log"
  status=0
  # part SECONDS NAME COMMAND...: the command under its own time limit, its output in the log.
  part() {
    local seconds="$1" name="$2" start=$SECONDS rc=0
    shift 2
    echo "== $name (at most $seconds s): $*" >>"$log"
    timeout --kill-after=10 "$seconds" "$@" >>"$log" 2>&1 || rc=$?
    echo "== $name: exit $rc after $((SECONDS - start)) s" >>"$log"
    [ "$rc" = 0 ] || status=1
  }
  if [ "$backend" = cuda ]; then
    resnet='resnet50-train batch=256 dtype=bf16'
    bert='bert-train model=large batch=32 seq=128 dtype=bf16'
    gemm_sizes=(4096 2048 16384)
    peer=(--cuda)
    resnet_peer=(--batch 256 --steps 10 --warmup 3)
    bert_peer=(--model large --batch 32 --seq 128 --steps 10 --warmup 3)
  else
    resnet='resnet50-train batch=2 image=64 classes=10 dtype=bf16'
    bert='bert-train model=tiny batch=2 seq=32 dtype=bf16'
    gemm_sizes=(256 128 1024)
    peer=()
    resnet_peer=(--batch 2 --image 64 --classes 10 --steps 1 --warmup 1)
    bert_peer=(--model tiny --batch 2 --seq 32 --steps 1 --warmup 1)
  fi
  # 1. The cuda tests (about 1.5 min).
  part 100 tests "$here/bin/test_cuda" --gtest_brief=1
  part 40 backend-tests "$here/bin/test_backends" --gtest_brief=1 --gtest_filter='*/cuda:Agreement.*'
  # 2. Each attention pass planned alone, with cuDNN's own log of what it refused, and a GEMM
  # k-sweep for the accumulation model (1 min).
  part 30 attention env CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG="$out/cudnn-attention.log" \
    "$here/bin/test_cuda" --gtest_brief=1 --gtest_filter='CudnnAttention*'
  m="${gemm_sizes[0]}"
  part 60 gemm "$here/bin/trainbench" run -b "$backend" -v -o "$out/gemm.json" \
    -w "gemm m=$m n=$m k=${gemm_sizes[1]} dtype=tf32" -w "gemm m=$m n=$m k=${gemm_sizes[2]} dtype=tf32" \
    -w "gemm m=$m n=$m k=${gemm_sizes[2]} dtype=bf16 out=f32"
  # 3. The training steps, each stage's seconds in the log (5 min).
  part 300 steps "$here/bin/trainbench" run -b "$backend" -v --time-budget 5 -o "$out/steps.json" \
    -w "$resnet" -w "$bert"
  # 4. PyTorch's same steps (2 min).
  if python3 -c 'import torch' 2>/dev/null; then
    part 60 pytorch-resnet50 python3 "$here/pytorch_reference.py" resnet50 "${peer[@]}" \
      --dtype bf16 "${resnet_peer[@]}" -o "$out/pytorch-resnet50.json"
    part 60 pytorch-bert python3 "$here/pytorch_reference.py" bert "${peer[@]}" --dtype bf16 \
      --attention fused "${bert_peer[@]}" -o "$out/pytorch-bert.json"
  else
    echo "== pytorch: python3 has no torch here; the peers did not run" >>"$log"
    [ "$backend" = cuda ] && status=1
  fi
  # 5. The device and the environment.
  {
    date -u
    uname -a
    nvidia-smi 2>&1 || echo "nvidia-smi: not here"
    env | grep -E '^(CUDA|CUDNN|NCCL|NVIDIA|OMP|LD_LIBRARY_PATH)' | sort
  } >"$out/environment.txt" 2>&1
  # The cuDNN log is kept to its last 4 MB: the files come back whole or not at all.
  if [ -f "$out/cudnn-attention.log" ]; then
    tail -c 4000000 "$out/cudnn-attention.log" >"$out/cudnn-attention.log.tail"
    mv "$out/cudnn-attention.log.tail" "$out/cudnn-attention.log"
  fi
  echo "budget: $(ls "$out" | wc -l) files in $out, exit $status" >>"$log"
  exit "$status"
fi
if [ "${1:-}" = "exec" ]; then  # exec PROGRAM [ARGS]: one packed program, e.g. a test with a filter
  program="${2:?exec needs a program in $here/bin}"
  shift 2
  exec "$here/bin/$program" "$@"
fi
exec "$here/bin/trainbench" "$@"
RUN
chmod +x "$stage/run.sh"
tar -C "$(dirname "$stage")" -cJf "$out" trainbench-gpu
rm -rf "$(dirname "$stage")"
echo "packed $out for $arch ($(du -h "$out" | cut -f1)); libraries: $(tar -tJf "$out" | grep -c '/lib/.')"
