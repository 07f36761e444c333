// Per-element arithmetic of the cuda backend's training kernels, in float, compiled for the
// host as well so CPU tests check it against the shared CPU code's double-precision ops.
#pragma once

#include <cmath>
#include <cstdint>

#include "backends/cuda/nhwc.h"
#include "backends/host_device.h"
#include "backends/ops.h"
#include "backends/seeded.h"

namespace tb::cuda {

inline constexpr float kInverseSqrt2 = 0.707106781186547524f;
inline constexpr float kInverseSqrt2Pi = 0.398942280401432678f;

// GELU with erf, as BERT defines it: x * Phi(x).
TB_HOST_DEVICE inline float gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * kInverseSqrt2));
}
TB_HOST_DEVICE inline float gelu_gradient(float x, float dy) {
  const float cdf = 0.5f * (1.0f + erff(x * kInverseSqrt2));
  return dy * (cdf + x * kInverseSqrt2Pi * expf(-0.5f * x * x));
}
// ReLU's and tanh's gradients come from their outputs.
TB_HOST_DEVICE inline float relu_gradient(float y, float dy) {
  return y > 0.0f ? dy : 0.0f;
}
TB_HOST_DEVICE inline float tanh_gradient(float y, float dy) {
  return dy * (1.0f - y * y);
}

// Inverted dropout of element i of execution `step`; forward and backward are the same map.
TB_HOST_DEVICE inline float dropout_element(float x, std::uint64_t seed, std::int32_t step,
                                            std::int64_t i, std::uint64_t threshold, float scale) {
  return dropout_hash(seed, step, i) >= threshold ? x * scale : 0.0f;
}

// A seeded value uniform in [-1, 1) for element i: device buffers filled where they live (an
// engine search times real-looking data, not zeros).
TB_HOST_DEVICE inline float seeded_uniform(std::uint64_t seed, std::int64_t i) {
  return static_cast<float>(mix64(seed + static_cast<std::uint64_t>(i) * kGoldenGamma) >> 40) *
             0x1.0p-23f -
         1.0f;
}

// The input gradient of a normalization (batch norm over a channel, layer norm over a row) at
// one element: factor / n * (n g - sum(g) - xhat sum(g xhat)), where g is the gradient reaching
// the normalized value (batch norm: dy, factor gamma / std; layer norm: dy gamma,
// factor 1 / std) and the sums run over the n values normalized together.
TB_HOST_DEVICE inline float normalization_gradient(float g, float xhat, float sum_g,
                                                   float sum_g_xhat, float factor, float n) {
  return factor / n * (n * g - sum_g - xhat * sum_g_xhat);
}

// Running statistics as PyTorch keeps them: the batch variance made unbiased over the
// `reduced` values it came from, blended with weight `momentum`.
TB_HOST_DEVICE inline float running_mean_update(float running, float mean, float momentum) {
  return (1.0f - momentum) * running + momentum * mean;
}
TB_HOST_DEVICE inline float running_variance_update(float running, float variance,
                                                    std::int64_t reduced, float momentum) {
  const float unbiased = reduced > 1 ? static_cast<float>(reduced) / (reduced - 1) : 1.0f;
  return (1.0f - momentum) * running + momentum * variance * unbiased;
}

// cuDNN's batch norm keeps 1 / sqrt(variance + epsilon) per channel where the ops here keep the
// batch variance: the two conversions.
TB_HOST_DEVICE inline float inverse_std(float variance, float epsilon) {
  return 1.0f / sqrtf(variance + epsilon);
}
TB_HOST_DEVICE inline float variance_from_inverse_std(float inverse, float epsilon) {
  const float variance = 1.0f / (inverse * inverse) - epsilon;
  return variance > 0.0f ? variance : 0.0f;  // rounding may leave a constant channel below 0
}

// The outputs of a max-pooling window that cover input coordinate `in` along one axis:
// [first, last] (empty when first > last), for kernel k, stride s, padding p, `outputs` wide.
struct WindowRange {
  std::int64_t first, last;
};
TB_HOST_DEVICE inline WindowRange covering_outputs(std::int64_t in, std::int64_t k, std::int64_t s,
                                                   std::int64_t p, std::int64_t outputs) {
  // Output o covers inputs [o s - p, o s - p + k - 1].
  const std::int64_t top = in + p - k + 1;
  std::int64_t first = top <= 0 ? 0 : (top + s - 1) / s;
  std::int64_t last = (in + p) / s;
  if (last > outputs - 1) last = outputs - 1;
  return {first, last};
}

// Max pooling at one output (n, c, y, x) of `in`, reading values through read(offset): the
// maximum and where it is in its image plane (iy * iw + ix, what backward takes; the first of
// equal maxima wins). Either layout.
struct WindowMax {
  float value;
  int where;
};
template <typename Read>
TB_HOST_DEVICE WindowMax max_pool_window(const PoolOp& op, const ActivationShape& in,
                                         std::int64_t n, std::int64_t c, std::int64_t y,
                                         std::int64_t x, Read read) {
  WindowMax best{-INFINITY, -1};
  for (std::int64_t ky = 0; ky < op.kh; ++ky)
    for (std::int64_t kx = 0; kx < op.kw; ++kx) {
      const std::int64_t iy = y * op.sh - op.ph + ky, ix = x * op.sw - op.pw + kx;
      if (iy < 0 || iy >= op.ih || ix < 0 || ix >= op.iw) continue;
      const float value = read(in.offset(n, c, iy, ix));
      if (best.where < 0 || value > best.value) best = {value, static_cast<int>(iy * op.iw + ix)};
    }
  return best;
}

// Max pooling's input gradient at one input (n, c, iy, ix): the sum, in output order, of the
// output gradients whose maximum it was, reading them through diff(offset) and the recorded
// positions through where(offset) at offsets of `out`.
template <typename Diff, typename Where>
TB_HOST_DEVICE float max_pool_input_gradient(const PoolOp& op, const ActivationShape& out,
                                             std::int64_t n, std::int64_t c, std::int64_t iy,
                                             std::int64_t ix, Diff diff, Where where) {
  const WindowRange rows = covering_outputs(iy, op.kh, op.sh, op.ph, out.h);
  const WindowRange cols = covering_outputs(ix, op.kw, op.sw, op.pw, out.w);
  const std::int64_t self = iy * op.iw + ix;
  float sum = 0;
  for (std::int64_t y = rows.first; y <= rows.last; ++y)
    for (std::int64_t x = cols.first; x <= cols.last; ++x) {
      const std::int64_t o = out.offset(n, c, y, x);
      if (where(o) == self) sum += diff(o);
    }
  return sum;
}

// The activations a batch norm or pooling op reads and writes, in the layout the backend keeps
// for its dtype (pooling's output: out_shape).
inline ActivationShape activation_shape(const BatchNormOp& op) {
  return {op.mb, op.channels, op.h, op.w, channels_last(op.dtype, op.layout)};
}
inline ActivationShape in_shape(const PoolOp& op) {
  return {op.mb, op.channels, op.ih, op.iw, channels_last(op.dtype, op.layout)};
}
inline ActivationShape out_shape(const PoolOp& op) {
  return {op.mb, op.channels, op.oh(), op.ow(), channels_last(op.dtype, op.layout)};
}

}  // namespace tb::cuda
