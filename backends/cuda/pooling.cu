// The cuda backend's own training kernels (training_kernels.h declares their launchers): max and
// average pooling in either layout.
#include "backends/cuda/kernel_common.cuh"
#include "backends/cuda/training_kernels.h"
#include "backends/cuda/training_math.h"

namespace tb::cuda {
namespace {

// --- pooling, either layout (the window arithmetic is training_math.h's) ---

template <typename T>
__global__ void max_pool_forward_kernel(PoolOp op, ActivationShape from, ActivationShape to,
                                        const T* src, T* dst, int* indices, long long n) {
  TB_GRID_STRIDE(i, n) {
    const ActivationShape::Coordinates o = to.coordinates(i);
    const WindowMax best = max_pool_window(op, from, o.n, o.c, o.y, o.x,
                                           [src](long long k) { return to_float(src[k]); });
    dst[i] = from_float<T>(best.value);
    indices[i] = best.where;
  }
}

// Each input gathers the gradients of the outputs whose maximum it was, in output order.
template <typename T>
__global__ void max_pool_backward_kernel(PoolOp op, ActivationShape from, ActivationShape to,
                                         const T* diff_dst, const int* indices, T* diff_src,
                                         long long n) {
  TB_GRID_STRIDE(i, n) {
    const ActivationShape::Coordinates p = from.coordinates(i);
    diff_src[i] = from_float<T>(max_pool_input_gradient(
        op, to, p.n, p.c, p.y, p.x, [diff_dst](long long k) { return to_float(diff_dst[k]); },
        [indices](long long k) { return static_cast<long long>(indices[k]); }));
  }
}

// NCHW: a block per (image, channel) plane.
template <typename T>
__global__ void average_pool_forward_kernel(const T* src, T* dst, long long plane) {
  const T* x = src + blockIdx.x * plane;
  float sum = 0;
  for (long long i = threadIdx.x; i < plane; i += blockDim.x) sum += to_float(x[i]);
  sum = block_sum(sum);
  if (threadIdx.x == 0) dst[blockIdx.x] = from_float<T>(sum / plane);
}

// NHWC: a thread per (image, channel); neighbouring threads read neighbouring channels.
template <typename T>
__global__ void average_pool_nhwc_forward_kernel(const T* src, T* dst, long long mb,
                                                 long long channels, long long plane) {
  TB_GRID_STRIDE(j, mb * channels) {
    const T* x = src + (j / channels) * plane * channels + j % channels;
    float sum = 0;
    for (long long p = 0; p < plane; ++p) sum += to_float(x[p * channels]);
    dst[j] = from_float<T>(sum / plane);
  }
}

template <typename T>
__global__ void average_pool_backward_kernel(const T* diff_dst, T* diff_src, long long n,
                                             ActivationShape from) {
  const long long plane = from.h * from.w;
  TB_GRID_STRIDE(i, n) {
    const ActivationShape::Coordinates p = from.coordinates(i);
    diff_src[i] = from_float<T>(to_float(diff_dst[p.n * from.c + p.c]) / plane);
  }
}

}  // namespace

cudaError_t launch_pool(const PoolOp& op, const PoolBuffers& b, cudaStream_t stream) {
  const ActivationShape from = in_shape(op), to = out_shape(op);
  const long long inputs = op.mb * op.channels * op.ih * op.iw;
  const long long outputs = op.mb * op.channels * op.oh() * op.ow();
  const bool max = op.kind == PoolKind::max;
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (op.pass == Pass::forward) {
      if (max)
        max_pool_forward_kernel<<<grid_for(outputs), kThreads, 0, stream>>>(
            op, from, to, in<T>(b.src), out<T>(b.dst), b.indices, outputs);
      else if (from.nhwc)
        average_pool_nhwc_forward_kernel<<<grid_for(op.mb * op.channels), kThreads, 0, stream>>>(
            in<T>(b.src), out<T>(b.dst), op.mb, op.channels, op.ih * op.iw);
      else
        average_pool_forward_kernel<<<static_cast<unsigned>(op.mb * op.channels), kThreads, 0,
                                      stream>>>(in<T>(b.src), out<T>(b.dst), op.ih * op.iw);
    } else if (max) {
      max_pool_backward_kernel<<<grid_for(inputs), kThreads, 0, stream>>>(
          op, from, to, in<T>(b.diff_dst), b.indices, out<T>(b.diff_src), inputs);
    } else {
      average_pool_backward_kernel<<<grid_for(inputs), kThreads, 0, stream>>>(
          in<T>(b.diff_dst), out<T>(b.diff_src), inputs, from);
    }
    return cudaGetLastError();
  });
}

}  // namespace tb::cuda
