// The CPU kernels built for x86-64-v4 (AVX-512 F, BW, CD, DQ, VL, 512-bit vectors):
// backends/cpu_kernels/CMakeLists.txt compiles this file, and only this one, with -march=x86-64-v4
// -mprefer-vector-width=512. AdamW and LAMB are written here with intrinsics, without the
// divider; the other kernels are the shared bodies.
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__) || \
    !defined(__AVX512VL__)
#error "vector_kernels_avx512.cpp must be compiled with -march=x86-64-v4"
#endif

#include <immintrin.h>

#include <cfloat>

#define TB_ISA_NAMESPACE avx512
#include "backends/cpu_kernels/vector_kernels_body.inc"

namespace tb::cpu::avx512 {
namespace {

// 1 / (sqrt(v * inverse_c2) + epsilon) for 16 lanes without the divider: AdamW's sqrt and
// division share it, which held the update to 24 GB/s where its streams move 42. rsqrt14 and
// rcp14 (relative error below 2^-14), each refined by one Newton step, land within float's
// rounding; v * inverse_c2 below the smallest normal float takes sqrt 0 (it is under 1e-19,
// far below epsilon).
inline __m512 adam_inverse_denominator(__m512 v, __m512 inverse_c2, __m512 epsilon) {
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
inline MomentLanes moment_lanes(const AdamCoefficients& k) {
  return {_mm512_set1_ps(k.beta1), _mm512_set1_ps(k.beta2), _mm512_set1_ps(1.0f - k.beta1),
          _mm512_set1_ps(1.0f - k.beta2)};
}
inline Moments update_moments(const MomentLanes& c, __mmask16 mask, const float* g, float* m,
                              float* v) {
  const __m512 grad = _mm512_maskz_loadu_ps(mask, g);
  const Moments next{
      _mm512_fmadd_ps(c.beta1, _mm512_maskz_loadu_ps(mask, m), _mm512_mul_ps(c.rest1, grad)),
      _mm512_fmadd_ps(c.beta2, _mm512_maskz_loadu_ps(mask, v),
                      _mm512_mul_ps(c.rest2, _mm512_mul_ps(grad, grad)))};
  _mm512_mask_storeu_ps(m, mask, next.m);
  _mm512_mask_storeu_ps(v, mask, next.v);
  return next;
}

void adamw_avx512(std::int64_t count, float* weights, const float* grads, float* m, float* v,
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

inline double lane_sum(__m512 x) {
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
inline __m512 lamb_direction(__m512 mi, __m512 vi, __m512 w, const LambLanes& c) {
  return _mm512_fmadd_ps(_mm512_mul_ps(mi, c.inverse_c1),
                         adam_inverse_denominator(vi, c.inverse_c2, c.epsilon),
                         _mm512_mul_ps(c.decay, w));
}

// lamb_loop's two passes per tensor, 16 lanes at a time; a chunk's last partial block
// is masked (its zero lanes add nothing to the norms).
void lamb_avx512(std::int64_t tensors, const std::int32_t* offsets, float* weights,
                 const float* grads, float* m, float* v, const AdamCoefficients& k) {
  const LambLanes c{_mm512_set1_ps(1.0f / k.correction1), _mm512_set1_ps(1.0f / k.correction2),
                    _mm512_set1_ps(k.epsilon), _mm512_set1_ps(k.weight_decay)};
  const MomentLanes moments = moment_lanes(k);
  for (std::int64_t t = 0; t < tensors; ++t) {
    const std::int64_t begin = offsets[t], end = offsets[t + 1];
    double weight_norm = 0, update_norm = 0;
#pragma omp parallel for schedule(static) reduction(+ : weight_norm, update_norm)
    for (std::int64_t first = begin; first < end; first += kLambChunk) {
      const std::int64_t last = min_index(first + kLambChunk, end);
      __m512 weights_squared = _mm512_setzero_ps(), updates_squared = _mm512_setzero_ps();
      for (std::int64_t i = first; i < last; i += 16) {
        const __mmask16 mask = block_mask(last - i);
        const Moments next = update_moments(moments, mask, grads + i, m + i, v + i);
        const __m512 w = _mm512_maskz_loadu_ps(mask, weights + i);
        const __m512 u = lamb_direction(next.m, next.v, w, c);
        weights_squared = _mm512_fmadd_ps(w, w, weights_squared);
        updates_squared = _mm512_fmadd_ps(u, u, updates_squared);
      }
      weight_norm += lane_sum(weights_squared);
      update_norm += lane_sum(updates_squared);
    }
    const __m512 step = _mm512_set1_ps(lamb_step(k.learning_rate, weight_norm, update_norm));
#pragma omp parallel for schedule(static)
    for (std::int64_t first = begin; first < end; first += kLambChunk) {
      const std::int64_t last = min_index(first + kLambChunk, end);
      for (std::int64_t i = first; i < last; i += 16) {
        const __mmask16 mask = block_mask(last - i);
        const __m512 w = _mm512_maskz_loadu_ps(mask, weights + i);
        const __m512 u = lamb_direction(_mm512_maskz_loadu_ps(mask, m + i),
                                        _mm512_maskz_loadu_ps(mask, v + i), w, c);
        _mm512_mask_storeu_ps(weights + i, mask, _mm512_fnmadd_ps(step, u, w));
      }
    }
  }
}

// The shared table with the intrinsic AdamW and LAMB.
constexpr CpuKernels make_avx512_kernels() {
  CpuKernels kernels = make_kernels(Isa::avx512);
  kernels.adamw_f32 = adamw_avx512;
  kernels.lamb_f32 = lamb_avx512;
  return kernels;
}

}  // namespace

constinit const CpuKernels kKernels = make_avx512_kernels();

}  // namespace tb::cpu::avx512
