// RMSNorm's CUDA kernels (backends/ops/rms_norm.h): one block per row, float arithmetic on f32,
// bf16 or f16 data; diff_gamma by the shared column sums.
#include "backends/cuda/kernel_common.cuh"
#include "backends/cuda/training_kernels.h"

namespace tb::cuda {
namespace {

template <typename T>
__global__ void rms_norm_forward_kernel(const T* src, const float* gamma, T* dst,
                                        float* inverse_rms, long long cols, float epsilon) {
  const long long row = blockIdx.x;
  const T* x = src + row * cols;
  float squares = 0;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x)
    squares += to_float(x[c]) * to_float(x[c]);
  const float inverse = 1.0f / sqrtf(block_sum(squares) / cols + epsilon);
  for (long long c = threadIdx.x; c < cols; c += blockDim.x)
    dst[row * cols + c] = from_float<T>(to_float(x[c]) * inverse * gamma[c]);
  if (threadIdx.x == 0) inverse_rms[row] = inverse;
}

template <typename T>
__global__ void rms_norm_backward_kernel(const T* src, const T* diff_dst, const float* gamma,
                                         const float* inverse_rms, T* diff_src, long long cols) {
  const long long row = blockIdx.x;
  const T *x = src + row * cols, *dy = diff_dst + row * cols;
  const float inverse = inverse_rms[row];
  float projection = 0;  // sum of g * xhat, g = dy * gamma
  for (long long c = threadIdx.x; c < cols; c += blockDim.x)
    projection += to_float(dy[c]) * gamma[c] * to_float(x[c]) * inverse;
  const float mean_projection = block_sum(projection) / cols;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_float(dy[c]) * gamma[c], xhat = to_float(x[c]) * inverse;
    diff_src[row * cols + c] = from_float<T>(inverse * (g - xhat * mean_projection));
  }
}

// diff_gamma: first = sum over rows of dy * xhat.
template <typename T>
struct RmsNormColumns {
  const T *src, *diff_dst;
  const float* inverse_rms;
  __device__ void operator()(long long r, long long c, long long cols, float& first, float&) const {
    first += to_float(diff_dst[r * cols + c]) * to_float(src[r * cols + c]) * inverse_rms[r];
  }
};

}  // namespace

std::size_t rms_norm_scratch_bytes(const RmsNormOp& op) {
  return op.pass == Pass::backward ? column_sums_scratch_bytes(op.cols) : 0;
}

cudaError_t launch_rms_norm_forward(const RmsNormOp& op, const void* src, const float* gamma,
                                    void* dst, float* inverse_rms, cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    rms_norm_forward_kernel<<<static_cast<unsigned>(op.rows), kRowThreads, 0, stream>>>(
        in<T>(src), gamma, out<T>(dst), inverse_rms, op.cols, op.epsilon);
    return cudaGetLastError();
  });
}

cudaError_t launch_rms_norm_backward(const RmsNormOp& op, const void* src, const void* diff_dst,
                                     const float* gamma, const float* inverse_rms, void* diff_src,
                                     float* diff_gamma, void* scratch, cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    rms_norm_backward_kernel<<<static_cast<unsigned>(op.rows), kRowThreads, 0, stream>>>(
        in<T>(src), in<T>(diff_dst), gamma, inverse_rms, out<T>(diff_src), op.cols);
    if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
    return column_sums(RmsNormColumns<T>{in<T>(src), in<T>(diff_dst), inverse_rms}, op.rows,
                       op.cols, diff_gamma, static_cast<float*>(nullptr), scratch, stream);
  });
}

}  // namespace tb::cuda
