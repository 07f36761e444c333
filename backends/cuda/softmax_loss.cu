// The cuda backend's own training kernels (training_kernels.h declares their launchers): the scaled
// masked softmax and the softmax cross-entropy loss.
#include "backends/cuda/kernel_common.cuh"
#include "backends/cuda/training_kernels.h"
#include "backends/cuda/training_math.h"

namespace tb::cuda {
namespace {

// --- softmax: one warp per row ---

template <typename T>
__global__ void softmax_forward_kernel(const T* src, const float* mask, T* dst, long long rows,
                                       long long cols, float scale, long long rows_per_mask) {
  const long long row = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // the whole warp leaves together
  const T* x = src + row * cols;
  const float* bias = mask ? mask + (row / rows_per_mask) * cols : nullptr;
  auto logit = [&](long long c) { return scale * to_float(x[c]) + (bias ? bias[c] : 0.0f); };
  float top = -INFINITY;
  for (long long c = lane; c < cols; c += 32) top = fmaxf(top, logit(c));
  top = warp_max(top);
  float sum = 0;
  for (long long c = lane; c < cols; c += 32) sum += expf(logit(c) - top);
  const float inverse = 1.0f / warp_sum(sum);
  for (long long c = lane; c < cols; c += 32)
    dst[row * cols + c] = from_float<T>(expf(logit(c) - top) * inverse);
}

template <typename T>
__global__ void softmax_backward_kernel(const T* dst, const T* diff_dst, T* diff_src,
                                        long long rows, long long cols, float scale) {
  const long long row = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T *y = dst + row * cols, *dy = diff_dst + row * cols;
  float dot = 0;
  for (long long c = lane; c < cols; c += 32) dot += to_float(dy[c]) * to_float(y[c]);
  dot = warp_sum(dot);
  for (long long c = lane; c < cols; c += 32)
    diff_src[row * cols + c] = from_float<T>(scale * to_float(y[c]) * (to_float(dy[c]) - dot));
}

unsigned warp_rows_grid(long long rows) {
  return static_cast<unsigned>((rows * 32 + kThreads - 1) / kThreads);
}

// --- softmax cross-entropy: one block per row, then the mean over rows ---

template <typename T>
__global__ void cross_entropy_rows_kernel(const T* logits, const int* labels, T* probabilities,
                                          double* row_loss, long long classes) {
  const long long row = blockIdx.x;
  const T* z = logits + row * classes;
  float top = -INFINITY;
  for (long long c = threadIdx.x; c < classes; c += blockDim.x) top = fmaxf(top, to_float(z[c]));
  top = block_max(top);
  float sum = 0;
  for (long long c = threadIdx.x; c < classes; c += blockDim.x) sum += expf(to_float(z[c]) - top);
  sum = block_sum(sum);
  const float inverse = 1.0f / sum;
  for (long long c = threadIdx.x; c < classes; c += blockDim.x)
    probabilities[row * classes + c] = from_float<T>(expf(to_float(z[c]) - top) * inverse);
  // From the maximum and the sum: finite even where a probability underflows.
  if (threadIdx.x == 0)
    row_loss[row] = log(static_cast<double>(sum)) + top - to_float(z[labels[row]]);
}

template <typename T>
__global__ void mean_loss_kernel(const double* row_loss, long long rows, T* loss) {
  double sum = 0;
  for (long long r = threadIdx.x; r < rows; r += blockDim.x) sum += row_loss[r];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *loss = from_float<T>(static_cast<float>(sum / rows));
}

template <typename T>
__global__ void cross_entropy_backward_kernel(const T* probabilities, const int* labels,
                                              T* diff_logits, long long rows, long long classes,
                                              float loss_scale) {
  const float scale = loss_scale / rows;
  TB_GRID_STRIDE(i, rows * classes) {
    const long long r = i / classes, c = i % classes;
    diff_logits[i] =
        from_float<T>((to_float(probabilities[i]) - (c == labels[r] ? 1.0f : 0.0f)) * scale);
  }
}

}  // namespace

cudaError_t launch_softmax_forward(const SoftmaxOp& op, const void* src, const float* mask,
                                   void* dst, cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_forward_kernel<<<warp_rows_grid(op.rows), kThreads, 0, stream>>>(
        in<T>(src), op.masked ? mask : nullptr, out<T>(dst), op.rows, op.cols, op.scale,
        op.rows_per_mask);
    return cudaGetLastError();
  });
}

cudaError_t launch_softmax_backward(const SoftmaxOp& op, const void* dst, const void* diff_dst,
                                    void* diff_src, cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_backward_kernel<<<warp_rows_grid(op.rows), kThreads, 0, stream>>>(
        in<T>(dst), in<T>(diff_dst), out<T>(diff_src), op.rows, op.cols, op.scale);
    return cudaGetLastError();
  });
}

std::size_t softmax_cross_entropy_scratch_bytes(const SoftmaxCrossEntropyOp& op) {
  return op.pass == Pass::forward ? static_cast<std::size_t>(op.rows) * sizeof(double) : 0;
}

cudaError_t launch_softmax_cross_entropy_forward(const SoftmaxCrossEntropyOp& op,
                                                 const void* logits, const std::int32_t* labels,
                                                 void* probabilities, void* loss, void* scratch,
                                                 cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    double* row_loss = static_cast<double*>(scratch);
    cross_entropy_rows_kernel<<<static_cast<unsigned>(op.rows), kThreads, 0, stream>>>(
        in<T>(logits), labels, out<T>(probabilities), row_loss, op.classes);
    mean_loss_kernel<<<1, kThreads, 0, stream>>>(row_loss, op.rows, out<T>(loss));
    return cudaGetLastError();
  });
}

cudaError_t launch_softmax_cross_entropy_backward(const SoftmaxCrossEntropyOp& op,
                                                  const void* probabilities,
                                                  const std::int32_t* labels, float loss_scale,
                                                  void* diff_logits, cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_backward_kernel<<<grid_for(op.rows * op.classes), kThreads, 0, stream>>>(
        in<T>(probabilities), labels, out<T>(diff_logits), op.rows, op.classes, loss_scale);
    return cudaGetLastError();
  });
}

}  // namespace tb::cuda
