#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "backends/cuda/kernel_common.cuh"
#include "backends/cuda/training_kernels.h"
#include "backends/cuda/training_math.h"
#include "backends/optimizer_math.h"

namespace tb::cuda {
namespace {

// --- element-wise ---

template <typename T>
__global__ void eltwise_kernel(EltwiseKind kind, bool forward, const T* first, const T* diff_dst,
                               T* out, long long n) {
  TB_GRID_STRIDE(i, n) {
    const float x = to_float(first[i]);  // forward: the input; backward: GELU's input or the output
    float y;
    if (forward) {
      y = kind == EltwiseKind::relu   ? (x > 0.0f ? x : 0.0f)
          : kind == EltwiseKind::gelu ? gelu(x)
                                      : tanhf(x);
    } else {
      const float dy = to_float(diff_dst[i]);
      y = kind == EltwiseKind::relu   ? relu_gradient(x, dy)
          : kind == EltwiseKind::gelu ? gelu_gradient(x, dy)
                                      : tanh_gradient(x, dy);
    }
    out[i] = from_float<T>(y);
  }
}

template <typename T>
__global__ void add_kernel(const T* x, const T* y, T* dst, long long n, bool relu) {
  TB_GRID_STRIDE(i, n) {
    const float sum = to_float(x[i]) + to_float(y[i]);
    dst[i] = from_float<T>(relu && !(sum > 0.0f) ? 0.0f : sum);
  }
}

template <typename T>
__global__ void dropout_kernel(const T* in, T* out, long long n, unsigned long long seed, int step,
                               unsigned long long threshold, float scale) {
  TB_GRID_STRIDE(i, n) {
    out[i] = from_float<T>(dropout_element(to_float(in[i]), seed, step, i, threshold, scale));
  }
}

template <typename From, typename To>
__global__ void cast_kernel(const From* src, To* dst, long long n) {
  TB_GRID_STRIDE(i, n) {
    dst[i] = from_float<To>(to_float(src[i]));
  }
}

template <typename T>
__global__ void fill_random_kernel(T* data, long long n, unsigned long long seed) {
  TB_GRID_STRIDE(i, n) {
    data[i] = from_float<T>(seeded_uniform(seed, i));
  }
}

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

// --- column sums: what the layer norm and a bias gradient add up ---

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
// A fully connected layer's bias: first = sum of dy.
template <typename T>
struct BiasColumns {
  const T* diff_dst;
  __device__ void operator()(long long r, long long c, long long cols, float& first, float&) const {
    first += to_float(diff_dst[r * cols + c]);
  }
};

template <typename T>
__global__ void add_bias_kernel(const T* bias, T* dst, long long n, long long channels,
                                long long inner, bool relu) {
  TB_GRID_STRIDE(i, n) {
    const float value = to_float(dst[i]) + to_float(bias[(i / inner) % channels]);
    dst[i] = from_float<T>(relu ? fmaxf(value, 0.0f) : value);
  }
}

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

// --- embedding gather and scatter-add ---

template <typename T>
__global__ void gather_rows_kernel(const T* table, const int* ids, T* dst, long long tokens,
                                   long long dim) {
  TB_GRID_STRIDE(i, tokens * dim) {
    dst[i] = table[ids[i / dim] * dim + i % dim];
  }
}

__device__ __forceinline__ void add_to(float* target, float value) {
  atomicAdd(target, value);
}
__device__ __forceinline__ void add_to(__nv_bfloat16* target, float value) {
  atomicAdd(target, __float2bfloat16_rn(value));
}
__device__ __forceinline__ void add_to(__half* target, float value) {
  atomicAdd(target, __float2half_rn(value));
}

template <typename T, typename G>
__global__ void scatter_add_rows_kernel(const T* diff_dst, const int* ids, G* diff_table,
                                        long long tokens, long long dim) {
  TB_GRID_STRIDE(i, tokens * dim) {
    add_to(diff_table + ids[i / dim] * dim + i % dim, to_float(diff_dst[i]));
  }
}

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

// dst[i] for each destination offset i, from the same element's offset in the other layout.
template <typename T>
__global__ void convert_channels_kernel(const T* src, T* dst, ActivationShape from,
                                        ActivationShape to, long long n) {
  TB_GRID_STRIDE(i, n) {
    const ActivationShape::Coordinates p = to.coordinates(i);
    dst[i] = src[from.offset(p.n, p.c, p.y, p.x)];
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

// --- loss scaling and optimizers on f32 flat buffers ---

template <typename T>
__global__ void unscale_kernel(T* grads, long long n, float inverse_scale, int* found_nonfinite) {
  TB_GRID_STRIDE(i, n) {
    const float g = to_float(grads[i]) * inverse_scale;
    grads[i] = from_float<T>(g);
    if (!isfinite(g)) *found_nonfinite = 1;  // every writer stores the same value
  }
}

__global__ void sgd_kernel(float* weights, const float* grads, float* momentum, long long n,
                           float learning_rate, float mu, float weight_decay) {
  TB_GRID_STRIDE(i, n) {
    weights[i] =
        sgd_momentum_weight(learning_rate, mu, weight_decay, weights[i], grads[i], momentum[i]);
  }
}

__global__ void adamw_kernel(AdamFactors f, float* weights, const float* grads, float* m, float* v,
                             long long n) {
  TB_GRID_STRIDE(i, n) {
    float mi = m[i], vi = v[i];
    adam_moments(f, grads[i], mi, vi);
    m[i] = mi, v[i] = vi;
    weights[i] = adamw_weight(f, weights[i], mi, vi);
  }
}

// LAMB: grid (tensors, kLambChunks); each block owns one chunk of one tensor in both passes.
struct Chunk {
  long long begin, end;
};
__device__ Chunk lamb_chunk(const int* offsets) {
  const long long begin = offsets[blockIdx.x], end = offsets[blockIdx.x + 1];
  const long long per_chunk = (end - begin + gridDim.y - 1) / gridDim.y;
  const long long first = begin + blockIdx.y * per_chunk;
  return {first, min(end, first + per_chunk)};
}

__global__ void lamb_moments_kernel(AdamFactors f, const float* weights, const float* grads,
                                    float* m, float* v, const int* offsets, double* partial) {
  const Chunk chunk = lamb_chunk(offsets);
  float weights_squared = 0, updates_squared = 0;
  for (long long i = chunk.begin + threadIdx.x; i < chunk.end; i += blockDim.x) {
    float mi = m[i], vi = v[i];
    adam_moments(f, grads[i], mi, vi);
    m[i] = mi, v[i] = vi;
    const float u = lamb_update(f, weights[i], mi, vi);
    weights_squared += weights[i] * weights[i];
    updates_squared += u * u;
  }
  const double w = block_sum(static_cast<double>(weights_squared));
  const double u = block_sum(static_cast<double>(updates_squared));
  if (threadIdx.x == 0) {
    double* out = partial + 2 * (blockIdx.x * static_cast<long long>(gridDim.y) + blockIdx.y);
    out[0] = w, out[1] = u;
  }
}

__global__ void lamb_apply_kernel(AdamFactors f, float learning_rate, float* weights,
                                  const float* m, const float* v, const int* offsets,
                                  const double* partial) {
  const double* tensor = partial + 2 * blockIdx.x * static_cast<long long>(gridDim.y);
  double weight_norm = 0, update_norm = 0;
  for (unsigned chunk = 0; chunk < gridDim.y; ++chunk)
    weight_norm += tensor[2 * chunk], update_norm += tensor[2 * chunk + 1];
  const float step = lamb_step(learning_rate, weight_norm, update_norm);
  const Chunk chunk = lamb_chunk(offsets);
  for (long long i = chunk.begin + threadIdx.x; i < chunk.end; i += blockDim.x)
    weights[i] -= step * lamb_update(f, weights[i], m[i], v[i]);
}

}  // namespace

bool kernel_dtype(DType dtype) {
  return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
}

cudaError_t launch_eltwise(const EltwiseOp& op, const void* first, const void* diff_dst, void* dst,
                           cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    eltwise_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(
        op.kind, op.pass == Pass::forward, in<T>(first), in<T>(diff_dst), out<T>(dst), op.count);
    return cudaGetLastError();
  });
}

cudaError_t launch_add(const BinaryOp& op, const void* x, const void* y, void* dst,
                       cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(in<T>(x), in<T>(y), out<T>(dst),
                                                            op.count, op.fuse_relu);
    return cudaGetLastError();
  });
}

cudaError_t launch_dropout(const DropoutOp& op, const void* source, std::int32_t step, void* dst,
                           cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(
        in<T>(source), out<T>(dst), op.count, op.seed, step, dropout_threshold(op.probability),
        static_cast<float>(1.0 / (1.0 - op.probability)));
    return cudaGetLastError();
  });
}

cudaError_t launch_cast(const CastOp& op, const void* src, void* dst, cudaStream_t stream) {
  return with_type(op.from, [&](auto from) {
    return with_type(op.to, [&](auto to) {
      using From = decltype(from);
      using To = decltype(to);
      cast_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(in<From>(src), out<To>(dst),
                                                               op.count);
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_fill_random(DType dtype, void* data, std::int64_t count, std::uint64_t seed,
                               cudaStream_t stream) {
  return with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_random_kernel<<<grid_for(count), kThreads, 0, stream>>>(out<T>(data), count, seed);
    return cudaGetLastError();
  });
}

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

cudaError_t launch_embedding_forward(const EmbeddingOp& op, const void* table,
                                     const std::int32_t* ids, void* dst, cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    gather_rows_kernel<<<grid_for(op.tokens * op.dim), kThreads, 0, stream>>>(
        in<T>(table), ids, out<T>(dst), op.tokens, op.dim);
    return cudaGetLastError();
  });
}

cudaError_t launch_embedding_backward(const EmbeddingOp& op, const void* diff_dst,
                                      const std::int32_t* ids, void* diff_table,
                                      cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    return with_type(embedding_table_grad_dtype(op), [&](auto grad_tag) {
      using G = decltype(grad_tag);
      if (!op.accumulate)
        if (const cudaError_t error = cudaMemsetAsync(
                diff_table, 0, static_cast<std::size_t>(op.vocab * op.dim) * sizeof(G), stream);
            error != cudaSuccess)
          return error;
      scatter_add_rows_kernel<<<grid_for(op.tokens * op.dim), kThreads, 0, stream>>>(
          in<T>(diff_dst), ids, out<G>(diff_table), op.tokens, op.dim);
      return cudaGetLastError();
    });
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

cudaError_t launch_convert_channels(std::size_t element, std::int64_t n, std::int64_t c,
                                    std::int64_t h, std::int64_t w, const void* src, void* dst,
                                    bool to_nhwc, cudaStream_t stream) {
  const ActivationShape from{n, c, h, w, !to_nhwc}, to{n, c, h, w, to_nhwc};
  const long long count = n * c * h * w;
  if (element == 2)
    convert_channels_kernel<<<grid_for(count), kThreads, 0, stream>>>(
        static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(dst), from, to, count);
  else if (element == 4)
    convert_channels_kernel<<<grid_for(count), kThreads, 0, stream>>>(
        static_cast<const std::uint32_t*>(src), static_cast<std::uint32_t*>(dst), from, to, count);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_add_bias(DType dtype, std::int64_t count, std::int64_t channels,
                            std::int64_t inner, bool relu, const void* bias, void* dst,
                            cudaStream_t stream) {
  return with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<<<grid_for(count), kThreads, 0, stream>>>(in<T>(bias), out<T>(dst), count,
                                                              channels, inner, relu);
    return cudaGetLastError();
  });
}

std::size_t column_sums_scratch_bytes(std::int64_t cols, std::size_t accumulator) {
  return 2 * static_cast<std::size_t>(kColumnChunks * cols) * accumulator;
}

cudaError_t launch_bias_gradient(DType dtype, std::int64_t rows, std::int64_t cols,
                                 const void* diff_dst, float* diff_bias, void* scratch,
                                 cudaStream_t stream) {
  return with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    return column_sums(BiasColumns<T>{in<T>(diff_dst)}, rows, cols, diff_bias, nullptr, scratch,
                       stream);
  });
}

cudaError_t launch_unscale_gradients(const UnscaleGradientsOp& op, void* grads, float inverse_scale,
                                     std::int32_t* found_nonfinite, cudaStream_t stream) {
  if (const cudaError_t error = cudaMemsetAsync(found_nonfinite, 0, sizeof(std::int32_t), stream);
      error != cudaSuccess)
    return error;
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    unscale_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(out<T>(grads), op.count,
                                                                inverse_scale, found_nonfinite);
    return cudaGetLastError();
  });
}

std::size_t optimizer_scratch_bytes(const OptimizerOp& op) {
  return op.kind == OptimizerKind::lamb
             ? 2 * static_cast<std::size_t>(op.tensors) * kLambChunks * sizeof(double)
             : 0;
}

cudaError_t launch_optimizer(const OptimizerOp& op, float* weights, const float* grads,
                             float* first_moment, float* second_moment,
                             const std::int32_t* tensor_offsets, const float* hyper, void* scratch,
                             cudaStream_t stream) {
  if (op.kind == OptimizerKind::sgd_momentum) {
    sgd_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(weights, grads, first_moment, op.count,
                                                            hyper[0], hyper[1], hyper[2]);
    return cudaGetLastError();
  }
  const double step = hyper[5];
  const AdamFactors f =
      adam_factors({hyper[0], hyper[1], hyper[2], hyper[3], hyper[4],
                    static_cast<float>(1 - std::pow(static_cast<double>(hyper[1]), step)),
                    static_cast<float>(1 - std::pow(static_cast<double>(hyper[2]), step))});
  if (op.kind == OptimizerKind::adamw) {
    adamw_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(f, weights, grads, first_moment,
                                                              second_moment, op.count);
    return cudaGetLastError();
  }
  const dim3 grid(static_cast<unsigned>(op.tensors), kLambChunks);
  double* partial = static_cast<double*>(scratch);
  lamb_moments_kernel<<<grid, kThreads, 0, stream>>>(f, weights, grads, first_moment, second_moment,
                                                     tensor_offsets, partial);
  lamb_apply_kernel<<<grid, kThreads, 0, stream>>>(f, hyper[0], weights, first_moment,
                                                   second_moment, tensor_offsets, partial);
  return cudaGetLastError();
}

}  // namespace tb::cuda
