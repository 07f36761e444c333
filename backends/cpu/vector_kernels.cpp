#include "backends/cpu/vector_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/low_precision.h"

// One copy per instruction set, chosen at load time.
#define TB_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace tb::cpu {
namespace {

// e^x in float to about 2 ulp: 2^n e^r with |r| <= ln2 / 2 and a degree-6 polynomial; 0
// below e^-87.3 (the smallest normal float), where a masked logit lands. No libm call, so
// it vectorizes.
inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504f, kLn2High = 0.693145751953125f,
                  kLn2Low = 1.428606765330187e-06f;
  const float clamped = std::min(std::max(x, -87.0f), 88.0f);
  const float n = std::nearbyint(clamped * kLog2e);
  const float r = (clamped - n * kLn2High) - n * kLn2Low;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x < -87.0f ? 0.0f : p * scale;
}

// LAMB's tensors range from 2 to 23 M values: parallel inside each tensor, in chunks whose
// float partial norms vectorize and add up in double.
constexpr std::int64_t kLambChunk = 4096;

struct RowExtent {
  float top, sum;  // the row's largest value, and the sum of exp(value - top)
};

// One row: dst = softmax(scale * src + bias), in float.
inline RowExtent softmax_row(const float* src, const float* bias, float* dst, std::int64_t cols,
                             float scale) {
  float top = -INFINITY;
#pragma omp simd reduction(max : top)
  for (std::int64_t c = 0; c < cols; ++c)
    top = std::max(top, scale * src[c] + (bias ? bias[c] : 0.0f));
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t c = 0; c < cols; ++c) {
    const float e = fast_exp(scale * src[c] + (bias ? bias[c] : 0.0f) - top);
    dst[c] = e;
    sum += e;
  }
  const float inverse = 1.0f / sum;
#pragma omp simd
  for (std::int64_t c = 0; c < cols; ++c) dst[c] *= inverse;
  return {top, sum};
}

}  // namespace

TB_VECTOR_CLONES void dropout_f32(const float* in, float* out, std::int64_t count,
                                  std::uint64_t seed, std::int32_t step, std::uint64_t threshold,
                                  float scale) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i)
    out[i] = in[i] * (dropout_hash(seed, step, i) >= threshold ? scale : 0.0f);
}

TB_VECTOR_CLONES void dropout_bf16(const std::uint16_t* in, std::uint16_t* out, std::int64_t count,
                                   std::uint64_t seed, std::int32_t step, std::uint64_t threshold,
                                   float scale) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i)
    out[i] = float_to_bf16(bf16_to_float(in[i]) *
                           (dropout_hash(seed, step, i) >= threshold ? scale : 0.0f));
}

TB_VECTOR_CLONES void softmax_rows_f32(const float* src, const float* mask, float* dst,
                                       std::int64_t rows, std::int64_t cols, float scale,
                                       std::int64_t rows_per_mask) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r)
    softmax_row(src + r * cols, mask ? mask + (r / rows_per_mask) * cols : nullptr, dst + r * cols,
                cols, scale);
}

TB_VECTOR_CLONES void softmax_rows_bf16(const std::uint16_t* src, const float* mask,
                                        std::uint16_t* dst, std::int64_t rows, std::int64_t cols,
                                        float scale, std::int64_t rows_per_mask) {
#pragma omp parallel
  {
    std::vector<float> in(static_cast<std::size_t>(cols)), out(in.size());
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) in[c] = bf16_to_float(src[r * cols + c]);
      softmax_row(in.data(), mask ? mask + (r / rows_per_mask) * cols : nullptr, out.data(), cols,
                  scale);
      for (std::int64_t c = 0; c < cols; ++c) dst[r * cols + c] = float_to_bf16(out[c]);
    }
  }
}

TB_VECTOR_CLONES void cast_f32_to_bf16(const float* src, std::uint16_t* dst, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) dst[i] = float_to_bf16(src[i]);
}

TB_VECTOR_CLONES void cast_bf16_to_f32(const std::uint16_t* src, float* dst, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) dst[i] = bf16_to_float(src[i]);
}

TB_VECTOR_CLONES double softmax_cross_entropy_f32(const float* logits, const std::int32_t* labels,
                                                  float* probabilities, std::int64_t rows,
                                                  std::int64_t classes) {
  double loss = 0;
#pragma omp parallel for reduction(+ : loss) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * classes;
    const RowExtent row = softmax_row(z, nullptr, probabilities + r * classes, classes, 1.0f);
    // From the row's extent, not log(p): finite even where p underflows.
    loss += std::log(static_cast<double>(row.sum)) + row.top - z[labels[r]];
  }
  return loss;
}

namespace {

// 1 / (sqrt(v * inverse_c2) + epsilon) for 16 lanes without the divider: AdamW's sqrt and
// division share it, which held the update to 24 GB/s where its streams move 42. rsqrt14 and
// rcp14 (relative error below 2^-14), each refined by one Newton step, land within float's
// rounding; v * inverse_c2 below the smallest normal float takes sqrt 0 (it is under 1e-19,
// far below epsilon).
__attribute__((target("avx512f"))) inline __m512 adam_inverse_denominator(__m512 v,
                                                                          __m512 inverse_c2,
                                                                          __m512 epsilon) {
  const __m512 x = _mm512_mul_ps(v, inverse_c2);
  __m512 y = _mm512_maskz_rsqrt14_ps(0xffff, x);
  const __m512 half_x_y2 =
      _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_mul_ps(y, y));
  y = _mm512_mul_ps(y, _mm512_sub_ps(_mm512_set1_ps(1.5f), half_x_y2));
  const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(FLT_MIN), _CMP_GE_OQ);
  const __m512 d = _mm512_add_ps(_mm512_maskz_mov_ps(normal, _mm512_mul_ps(x, y)), epsilon);
  const __m512 r = _mm512_maskz_rcp14_ps(0xffff, d);
  return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}

// The lanes of the last, partial 16-value block of a range.
inline __mmask16 block_mask(std::int64_t left) {
  return left >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << left) - 1);
}

// AdamW's and LAMB's moments, m = beta1 m + (1 - beta1) g and v = beta2 v + (1 - beta2) g^2,
// for the masked lanes at g, m and v; m and v are stored back.
struct MomentLanes {
  __m512 beta1, beta2, rest1, rest2;
};
struct Moments {
  __m512 m, v;
};
__attribute__((target("avx512f"))) inline MomentLanes moment_lanes(const AdamCoefficients& k) {
  return {_mm512_set1_ps(k.beta1), _mm512_set1_ps(k.beta2), _mm512_set1_ps(1.0f - k.beta1),
          _mm512_set1_ps(1.0f - k.beta2)};
}
__attribute__((target("avx512f"))) inline Moments update_moments(const MomentLanes& c,
                                                                 __mmask16 mask, const float* g,
                                                                 float* m, float* v) {
  const __m512 grad = _mm512_maskz_loadu_ps(mask, g);
  const Moments next{
      _mm512_fmadd_ps(c.beta1, _mm512_maskz_loadu_ps(mask, m), _mm512_mul_ps(c.rest1, grad)),
      _mm512_fmadd_ps(c.beta2, _mm512_maskz_loadu_ps(mask, v),
                      _mm512_mul_ps(c.rest2, _mm512_mul_ps(grad, grad)))};
  _mm512_mask_storeu_ps(m, mask, next.m);
  _mm512_mask_storeu_ps(v, mask, next.v);
  return next;
}

__attribute__((target("avx512f"))) void adamw_avx512(std::int64_t count, float* weights,
                                                     const float* grads, float* m, float* v,
                                                     const AdamCoefficients& k) {
  const MomentLanes moments = moment_lanes(k);
  const __m512 decay = _mm512_set1_ps(1.0f - k.learning_rate * k.weight_decay),
               step_size = _mm512_set1_ps(k.learning_rate / k.correction1),
               inverse_c2 = _mm512_set1_ps(1.0f / k.correction2),
               epsilon = _mm512_set1_ps(k.epsilon);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; i += 16) {
    const __mmask16 mask = block_mask(count - i);
    const Moments next = update_moments(moments, mask, grads + i, m + i, v + i);
    const __m512 direction =
        _mm512_mul_ps(next.m, adam_inverse_denominator(next.v, inverse_c2, epsilon));
    const __m512 w = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, weights + i), decay);
    _mm512_mask_storeu_ps(weights + i, mask, _mm512_fnmadd_ps(step_size, direction, w));
  }
}

__attribute__((target("avx512f"))) inline double lane_sum(__m512 x) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, x);
  double sum = 0;
  for (const float lane : lanes) sum += lane;
  return sum;
}

// LAMB's per-element update m_hat / (sqrt(v_hat) + epsilon) + decay w, without the divider.
struct LambLanes {
  __m512 inverse_c1, inverse_c2, epsilon, decay;
};
__attribute__((target("avx512f"))) inline __m512 lamb_update(__m512 mi, __m512 vi, __m512 w,
                                                             const LambLanes& c) {
  return _mm512_fmadd_ps(_mm512_mul_ps(mi, c.inverse_c1),
                         adam_inverse_denominator(vi, c.inverse_c2, c.epsilon),
                         _mm512_mul_ps(c.decay, w));
}

// lamb_portable's two passes per tensor, 16 lanes at a time; a chunk's last partial block
// is masked (its zero lanes add nothing to the norms).
__attribute__((target("avx512f"))) void lamb_avx512(std::int64_t tensors,
                                                    const std::int32_t* offsets, float* weights,
                                                    const float* grads, float* m, float* v,
                                                    const AdamCoefficients& k) {
  const LambLanes c{_mm512_set1_ps(1.0f / k.correction1), _mm512_set1_ps(1.0f / k.correction2),
                    _mm512_set1_ps(k.epsilon), _mm512_set1_ps(k.weight_decay)};
  const MomentLanes moments = moment_lanes(k);
  for (std::int64_t t = 0; t < tensors; ++t) {
    const std::int64_t begin = offsets[t], end = offsets[t + 1];
    double weight_norm = 0, update_norm = 0;
#pragma omp parallel for schedule(static) reduction(+ : weight_norm, update_norm)
    for (std::int64_t first = begin; first < end; first += kLambChunk) {
      const std::int64_t last = std::min(first + kLambChunk, end);
      __m512 weights_squared = _mm512_setzero_ps(), updates_squared = _mm512_setzero_ps();
      for (std::int64_t i = first; i < last; i += 16) {
        const __mmask16 mask = block_mask(last - i);
        const Moments next = update_moments(moments, mask, grads + i, m + i, v + i);
        const __m512 w = _mm512_maskz_loadu_ps(mask, weights + i);
        const __m512 u = lamb_update(next.m, next.v, w, c);
        weights_squared = _mm512_fmadd_ps(w, w, weights_squared);
        updates_squared = _mm512_fmadd_ps(u, u, updates_squared);
      }
      weight_norm += lane_sum(weights_squared);
      update_norm += lane_sum(updates_squared);
    }
    const __m512 step = _mm512_set1_ps(lamb_step(k.learning_rate, weight_norm, update_norm));
#pragma omp parallel for schedule(static)
    for (std::int64_t first = begin; first < end; first += kLambChunk) {
      const std::int64_t last = std::min(first + kLambChunk, end);
      for (std::int64_t i = first; i < last; i += 16) {
        const __mmask16 mask = block_mask(last - i);
        const __m512 w = _mm512_maskz_loadu_ps(mask, weights + i);
        const __m512 u = lamb_update(_mm512_maskz_loadu_ps(mask, m + i),
                                     _mm512_maskz_loadu_ps(mask, v + i), w, c);
        _mm512_mask_storeu_ps(weights + i, mask, _mm512_fnmadd_ps(step, u, w));
      }
    }
  }
}

}  // namespace

void adamw_f32(std::int64_t count, float* weights, const float* grads, float* m, float* v,
               const AdamCoefficients& k) {
  if (__builtin_cpu_supports("avx512f")) return adamw_avx512(count, weights, grads, m, v, k);
  adamw_portable(count, weights, grads, m, v, k);
}

TB_VECTOR_CLONES void adamw_portable(std::int64_t count, float* weights, const float* grads,
                                     float* m, float* v, const AdamCoefficients& k) {
  const AdamFactors f = adam_factors(k);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    float mi = m[i], vi = v[i];
    adam_moments(f, grads[i], mi, vi);
    m[i] = mi;
    v[i] = vi;
    weights[i] = adamw_weight(f, weights[i], mi, vi);
  }
}

void lamb_f32(std::int64_t tensors, const std::int32_t* offsets, float* weights, const float* grads,
              float* m, float* v, const AdamCoefficients& k) {
  if (__builtin_cpu_supports("avx512f"))
    return lamb_avx512(tensors, offsets, weights, grads, m, v, k);
  lamb_portable(tensors, offsets, weights, grads, m, v, k);
}

TB_VECTOR_CLONES void lamb_portable(std::int64_t tensors, const std::int32_t* offsets,
                                    float* weights, const float* grads, float* m, float* v,
                                    const AdamCoefficients& k) {
  const AdamFactors f = adam_factors(k);
  for (std::int64_t t = 0; t < tensors; ++t) {
    const std::int64_t begin = offsets[t], end = offsets[t + 1];
    double weight_norm = 0, update_norm = 0;
#pragma omp parallel for schedule(static) reduction(+ : weight_norm, update_norm)
    for (std::int64_t first = begin; first < end; first += kLambChunk) {
      const std::int64_t last = std::min(first + kLambChunk, end);
      float weights_squared = 0, updates_squared = 0;
#pragma omp simd reduction(+ : weights_squared, updates_squared)
      for (std::int64_t i = first; i < last; ++i) {
        float mi = m[i], vi = v[i];
        adam_moments(f, grads[i], mi, vi);
        m[i] = mi;
        v[i] = vi;
        const float u = lamb_update(f, weights[i], mi, vi);
        weights_squared += weights[i] * weights[i];
        updates_squared += u * u;
      }
      weight_norm += weights_squared;
      update_norm += updates_squared;
    }
    const float step = lamb_step(k.learning_rate, weight_norm, update_norm);
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = begin; i < end; ++i)
      weights[i] -= step * lamb_update(f, weights[i], m[i], v[i]);
  }
}

}  // namespace tb::cpu
