// The bf16 peak probe of Arm cores with FEAT_BF16 (Neoverse V1, V2, N2): bfmmla. CMake
// compiles this file, and only this one, with -march=armv8.6-a+bf16; peak.cpp calls it only
// where AT_HWCAP2 shows BF16.
#include <arm_neon.h>

#include "backends/host/peak_arm.h"
#include "backends/low_precision.h"

namespace tb::cpu {

double bfmmla_neon(std::int64_t iterations, float one_value, float increment) {
  constexpr int kChains = 12;
  // Each accumulator element sums 4 products per step: B holds increment / 2, so it gains
  // 2 increments per step, as the other bf16 probes do.
  const bfloat16x8_t one = vreinterpretq_bf16_u16(vdupq_n_u16(float_to_bf16(one_value)));
  const bfloat16x8_t half = vreinterpretq_bf16_u16(vdupq_n_u16(float_to_bf16(increment / 2)));
  float32x4_t acc[kChains];
  for (auto& a : acc) a = vdupq_n_f32(0);
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = vbfmmlaq_f32(a, one, half);
  double sum = 0;
  for (const auto& a : acc) sum += vaddvq_f32(a);
  return sum / (kChains * 4.0);
}

}  // namespace tb::cpu
