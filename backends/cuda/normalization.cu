// The cuda backend's own training kernels (training_kernels.h declares their launchers): layer
// norm, batch norm (NCHW by per-plane sums; NHWC by column sums) and the small kernels around
// cuDNN's.
#include <array>

#include "backends/cuda/kernel_common.cuh"
#include "backends/cuda/training_kernels.h"
#include "backends/cuda/training_math.h"

namespace tb::cuda {
namespace {

// --- layer norm: one block per row ---

template <typename T>
__global__ void layer_norm_forward_kernel(const T* src, const float* gamma, const float* beta,
                                          T* dst, float* mean, float* variance, long long cols,
                                          float epsilon) {
  const long long row = blockIdx.x;
  const T* x = src + row * cols;
  float sum = 0;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) sum += to_float(x[c]);
  const float mu = block_sum(sum) / cols;
  float squares = 0;  // two passes: no cancellation
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = to_float(x[c]) - mu;
    squares += d * d;
  }
  const float var = block_sum(squares) / cols;
  const float rstd = 1.0f / sqrtf(var + epsilon);
  for (long long c = threadIdx.x; c < cols; c += blockDim.x)
    dst[row * cols + c] = from_float<T>((to_float(x[c]) - mu) * rstd * gamma[c] + beta[c]);
  if (threadIdx.x == 0) mean[row] = mu, variance[row] = var;
}

template <typename T>
__global__ void layer_norm_backward_kernel(const T* src, const T* diff_dst, const float* gamma,
                                           const float* mean, const float* variance, T* diff_src,
                                           long long cols, float epsilon) {
  const long long row = blockIdx.x;
  const T *x = src + row * cols, *dy = diff_dst + row * cols;
  const float mu = mean[row], rstd = 1.0f / sqrtf(variance[row] + epsilon);
  float sum_g = 0, sum_g_xhat = 0;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_float(dy[c]) * gamma[c];
    sum_g += g;
    sum_g_xhat += g * (to_float(x[c]) - mu) * rstd;
  }
  sum_g = block_sum(sum_g);
  sum_g_xhat = block_sum(sum_g_xhat);
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_float(dy[c]) * gamma[c];
    diff_src[row * cols + c] = from_float<T>(normalization_gradient(
        g, (to_float(x[c]) - mu) * rstd, sum_g, sum_g_xhat, rstd, static_cast<float>(cols)));
  }
}

// Layer norm: first = sum of dy * xhat (diff_gamma), second = sum of dy (diff_beta).
template <typename T>
struct LayerNormColumns {
  const T *src, *diff_dst;
  const float *mean, *variance;
  float epsilon;
  __device__ void operator()(long long r, long long c, long long cols, float& first,
                             float& second) const {
    const float dy = to_float(diff_dst[r * cols + c]);
    const float rstd = 1.0f / sqrtf(variance[r] + epsilon);
    first += dy * (to_float(src[r * cols + c]) - mean[r]) * rstd;
    second += dy;
  }
};

// --- batch norm: NCHW by per-plane partial sums and per-channel totals in double; NHWC by
// column sums over the [n h w, c] matrix; then one element pass ---

// partial[plane] = sum over the plane of x (centre null) or of (x - centre[c])^2.
template <typename T>
__global__ void plane_sums_kernel(const T* src, long long plane, int channels, const float* centre,
                                  double* partial) {
  const long long index = blockIdx.x;  // n * channels + c
  const T* x = src + index * plane;
  const float shift = centre ? centre[index % channels] : 0.0f;
  float sum = 0;
  for (long long i = threadIdx.x; i < plane; i += blockDim.x) {
    const float d = to_float(x[i]) - shift;
    sum += centre ? d * d : d;
  }
  const double total = block_sum(static_cast<double>(sum));
  if (threadIdx.x == 0) partial[index] = total;
}

// Per channel: the sum over images of the plane partials divided by `reduced`.
__global__ void channel_mean_kernel(const double* partial, int mb, int channels, long long reduced,
                                    float* out) {
  TB_GRID_STRIDE(c, channels) {
    double sum = 0;
    for (int n = 0; n < mb; ++n) sum += partial[n * channels + c];
    out[c] = static_cast<float>(sum / reduced);
  }
}

// NHWC, per channel (column): the mean of x (centre null) or of (x - centre[c])^2.
template <typename T>
struct ChannelMoments {
  const T* src;
  const float* centre;
  double inverse_count;
  __device__ void operator()(long long r, long long c, long long cols, double& first,
                             double&) const {
    const double x = to_float(src[r * cols + c]);
    if (!centre) {
      first += x * inverse_count;
    } else {
      const double d = x - centre[c];
      first += d * d * inverse_count;
    }
  }
};

__global__ void running_stats_kernel(const float* mean, const float* variance, int channels,
                                     long long reduced, float momentum, float* running_mean,
                                     float* running_var) {
  TB_GRID_STRIDE(c, channels) {
    running_mean[c] = running_mean_update(running_mean[c], mean[c], momentum);
    running_var[c] = running_variance_update(running_var[c], variance[c], reduced, momentum);
  }
}

template <typename T>
__global__ void batch_norm_apply_kernel(const T* src, const float* gamma, const float* beta,
                                        const float* mean, const float* variance, T* dst,
                                        int* relu_mask, bool relu, long long n,
                                        ActivationShape shape, float epsilon) {
  TB_GRID_STRIDE(i, n) {
    const long long c = shape.channel(i);
    const float scale = gamma[c] / sqrtf(variance[c] + epsilon);
    float y = (to_float(src[i]) - mean[c]) * scale + beta[c];
    if (relu) {
      if (relu_mask) relu_mask[i] = y > 0.0f;
      y = y > 0.0f ? y : 0.0f;
    }
    dst[i] = from_float<T>(y);
  }
}

// partial[0][plane] = sum of dy, partial[1][plane] = sum of dy * xhat (dy masked by the ReLU).
template <typename T>
__global__ void plane_gradient_sums_kernel(const T* src, const T* diff_dst, const int* relu_mask,
                                           const float* mean, const float* variance,
                                           long long plane, int channels, float epsilon,
                                           double* partial) {
  const long long index = blockIdx.x;
  const int c = static_cast<int>(index % channels);
  const float mu = mean[c], inv_std = 1.0f / sqrtf(variance[c] + epsilon);
  float sum_dy = 0, sum_dy_xhat = 0;
  for (long long i = index * plane + threadIdx.x; i < (index + 1) * plane; i += blockDim.x) {
    const float dy = relu_mask && !relu_mask[i] ? 0.0f : to_float(diff_dst[i]);
    sum_dy += dy;
    sum_dy_xhat += dy * (to_float(src[i]) - mu) * inv_std;
  }
  const double a = block_sum(static_cast<double>(sum_dy));
  const double b = block_sum(static_cast<double>(sum_dy_xhat));
  if (threadIdx.x == 0) partial[index] = a, partial[gridDim.x + index] = b;
}

__global__ void channel_gradient_kernel(const double* partial, int mb, int channels,
                                        float* diff_gamma, float* diff_beta) {
  const long long planes = static_cast<long long>(mb) * channels;
  TB_GRID_STRIDE(c, channels) {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int n = 0; n < mb; ++n)
      sum_dy += partial[n * channels + c], sum_dy_xhat += partial[planes + n * channels + c];
    diff_beta[c] = static_cast<float>(sum_dy);
    diff_gamma[c] = static_cast<float>(sum_dy_xhat);
  }
}

// NHWC, per channel (column): first = sum of dy * xhat, second = sum of dy (masked by the ReLU).
template <typename T>
struct ChannelGradientSums {
  const T *src, *diff_dst;
  const int* relu_mask;
  const float *mean, *variance;
  float epsilon;
  __device__ void operator()(long long r, long long c, long long cols, double& first,
                             double& second) const {
    const long long i = r * cols + c;
    const float dy = relu_mask && !relu_mask[i] ? 0.0f : to_float(diff_dst[i]);
    first += dy * (to_float(src[i]) - mean[c]) / sqrtf(variance[c] + epsilon);
    second += dy;
  }
};

template <typename T>
__global__ void batch_norm_backward_kernel(const T* src, const T* diff_dst, const int* relu_mask,
                                           const float* gamma, const float* mean,
                                           const float* variance, const float* diff_gamma,
                                           const float* diff_beta, T* diff_src, long long n,
                                           ActivationShape shape, float epsilon) {
  const float count = static_cast<float>(n / shape.c);
  TB_GRID_STRIDE(i, n) {
    const long long c = shape.channel(i);
    const float inv_std = 1.0f / sqrtf(variance[c] + epsilon);
    const float dy = relu_mask && !relu_mask[i] ? 0.0f : to_float(diff_dst[i]);
    diff_src[i] = from_float<T>(normalization_gradient(dy, (to_float(src[i]) - mean[c]) * inv_std,
                                                       diff_beta[c], diff_gamma[c],
                                                       gamma[c] * inv_std, count));
  }
}

template <typename T>
__global__ void relu_with_mask_kernel(T* data, int* mask, long long n) {
  TB_GRID_STRIDE(i, n) {
    const float y = to_float(data[i]);
    mask[i] = y > 0.0f;
    data[i] = from_float<T>(y > 0.0f ? y : 0.0f);
  }
}

template <typename T>
__global__ void masked_gradient_kernel(const T* diff_dst, const int* mask, T* out, long long n) {
  TB_GRID_STRIDE(i, n) {
    out[i] = mask[i] ? diff_dst[i] : from_float<T>(0.0f);
  }
}

__global__ void inverse_std_kernel(const float* variance, float epsilon, float* inverse,
                                   long long n) {
  TB_GRID_STRIDE(i, n) {
    inverse[i] = inverse_std(variance[i], epsilon);
  }
}

__global__ void variance_from_inverse_std_kernel(float* values, float epsilon, long long n) {
  TB_GRID_STRIDE(i, n) {
    values[i] = variance_from_inverse_std(values[i], epsilon);
  }
}

}  // namespace

std::size_t layer_norm_scratch_bytes(const LayerNormOp& op) {
  return op.pass == Pass::backward ? column_sums_scratch_bytes(op.cols) : 0;
}

cudaError_t launch_layer_norm_forward(const LayerNormOp& op, const void* src, const float* gamma,
                                      const float* beta, void* dst, float* mean, float* variance,
                                      cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    layer_norm_forward_kernel<<<static_cast<unsigned>(op.rows), kRowThreads, 0, stream>>>(
        in<T>(src), gamma, beta, out<T>(dst), mean, variance, op.cols, op.epsilon);
    return cudaGetLastError();
  });
}

cudaError_t launch_layer_norm_backward(const LayerNormOp& op, const void* src, const void* diff_dst,
                                       const float* gamma, const float* mean, const float* variance,
                                       void* diff_src, float* diff_gamma, float* diff_beta,
                                       void* scratch, cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    layer_norm_backward_kernel<<<static_cast<unsigned>(op.rows), kRowThreads, 0, stream>>>(
        in<T>(src), in<T>(diff_dst), gamma, mean, variance, out<T>(diff_src), op.cols, op.epsilon);
    return column_sums(LayerNormColumns<T>{in<T>(src), in<T>(diff_dst), mean, variance, op.epsilon},
                       op.rows, op.cols, diff_gamma, diff_beta, scratch, stream);
  });
}

std::size_t batch_norm_scratch_bytes(const BatchNormOp& op) {
  if (op.inference) return 0;
  if (activation_shape(op).nhwc) return column_sums_scratch_bytes(op.channels, sizeof(double));
  return 2 * static_cast<std::size_t>(op.mb * op.channels) * sizeof(double);
}

cudaError_t launch_batch_norm(const BatchNormOp& op, const BatchNormBuffers& b, void* scratch,
                              cudaStream_t stream) {
  const ActivationShape shape = activation_shape(op);
  const long long plane = op.h * op.w, n = op.mb * op.channels * plane, reduced = op.mb * plane;
  const int channels = static_cast<int>(op.channels), mb = static_cast<int>(op.mb);
  const unsigned planes = static_cast<unsigned>(op.mb * op.channels);
  double* partial = static_cast<double*>(scratch);
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (op.inference) {
      batch_norm_apply_kernel<<<grid_for(n), kThreads, 0, stream>>>(
          in<T>(b.src), b.gamma, b.beta, b.running_mean, b.running_var, out<T>(b.dst), nullptr,
          op.fuse_relu, n, shape, op.epsilon);
    } else if (op.pass == Pass::forward) {
      if (shape.nhwc) {
        const double inverse = 1.0 / static_cast<double>(reduced);
        for (const float* centre : std::array<const float*, 2>{nullptr, b.mean})
          if (const cudaError_t error = column_sums<double>(
                  ChannelMoments<T>{in<T>(b.src), centre, inverse}, reduced, channels,
                  centre ? b.variance : b.mean, nullptr, scratch, stream);
              error != cudaSuccess)
            return error;
      } else {
        for (const float* centre : std::array<const float*, 2>{nullptr, b.mean}) {
          plane_sums_kernel<<<planes, kThreads, 0, stream>>>(in<T>(b.src), plane, channels, centre,
                                                             partial);
          channel_mean_kernel<<<grid_for(channels), kThreads, 0, stream>>>(
              partial, mb, channels, reduced, centre ? b.variance : b.mean);
        }
      }
      running_stats_kernel<<<grid_for(channels), kThreads, 0, stream>>>(
          b.mean, b.variance, channels, reduced, op.momentum, b.running_mean, b.running_var);
      batch_norm_apply_kernel<<<grid_for(n), kThreads, 0, stream>>>(
          in<T>(b.src), b.gamma, b.beta, b.mean, b.variance, out<T>(b.dst), b.relu_mask,
          op.fuse_relu, n, shape, op.epsilon);
    } else {
      const int* mask = b.relu_mask;
      if (shape.nhwc) {
        if (const cudaError_t error =
                column_sums<double>(ChannelGradientSums<T>{in<T>(b.src), in<T>(b.diff_dst), mask,
                                                           b.mean, b.variance, op.epsilon},
                                    reduced, channels, b.diff_gamma, b.diff_beta, scratch, stream);
            error != cudaSuccess)
          return error;
      } else {
        plane_gradient_sums_kernel<<<planes, kThreads, 0, stream>>>(in<T>(b.src), in<T>(b.diff_dst),
                                                                    mask, b.mean, b.variance, plane,
                                                                    channels, op.epsilon, partial);
        channel_gradient_kernel<<<grid_for(channels), kThreads, 0, stream>>>(
            partial, mb, channels, b.diff_gamma, b.diff_beta);
      }
      batch_norm_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(
          in<T>(b.src), in<T>(b.diff_dst), mask, b.gamma, b.mean, b.variance, b.diff_gamma,
          b.diff_beta, out<T>(b.diff_src), n, shape, op.epsilon);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_relu_with_mask(DType dtype, std::int64_t count, void* data, std::int32_t* mask,
                                  cudaStream_t stream) {
  return with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    relu_with_mask_kernel<<<grid_for(count), kThreads, 0, stream>>>(out<T>(data), mask, count);
    return cudaGetLastError();
  });
}

cudaError_t launch_masked_gradient(DType dtype, std::int64_t count, const void* diff_dst,
                                   const std::int32_t* mask, void* result, cudaStream_t stream) {
  return with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    masked_gradient_kernel<<<grid_for(count), kThreads, 0, stream>>>(in<T>(diff_dst), mask,
                                                                     out<T>(result), count);
    return cudaGetLastError();
  });
}

cudaError_t launch_inverse_std(std::int64_t count, const float* variance, float epsilon,
                               float* inverse, cudaStream_t stream) {
  inverse_std_kernel<<<grid_for(count), kThreads, 0, stream>>>(variance, epsilon, inverse, count);
  return cudaGetLastError();
}

cudaError_t launch_variance_from_inverse_std(std::int64_t count, float* values, float epsilon,
                                             cudaStream_t stream) {
  variance_from_inverse_std_kernel<<<grid_for(count), kThreads, 0, stream>>>(values, epsilon,
                                                                             count);
  return cudaGetLastError();
}

}  // namespace tb::cuda
