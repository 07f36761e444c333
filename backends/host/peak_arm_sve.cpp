// The SVE fp32 peak probe: backends/host/CMakeLists.txt compiles this file, and only this one,
// with -march=armv8.2-a+sve; peak.cpp calls it only where AT_HWCAP shows SVE.
#include <arm_sve.h>

#include <vector>

#include "backends/host/peak_arm.h"

namespace tb::cpu {

int sve_fp32_lanes() {
  return static_cast<int>(svcntw());
}

double fma_sve(std::int64_t iterations, float one_value, float increment) {
  // Sizeless SVE types cannot form an array: twelve named chains.
  const svbool_t all = svptrue_b32();
  const svfloat32_t one = svdup_f32(one_value), inc = svdup_f32(increment);
  svfloat32_t a0 = svdup_f32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
              a8 = a0, a9 = a0, a10 = a0, a11 = a0;
  for (std::int64_t i = 0; i < iterations; ++i) {
    a0 = svmla_f32_x(all, inc, a0, one);  // inc + a * one: one fmla (or fmad) each
    a1 = svmla_f32_x(all, inc, a1, one);
    a2 = svmla_f32_x(all, inc, a2, one);
    a3 = svmla_f32_x(all, inc, a3, one);
    a4 = svmla_f32_x(all, inc, a4, one);
    a5 = svmla_f32_x(all, inc, a5, one);
    a6 = svmla_f32_x(all, inc, a6, one);
    a7 = svmla_f32_x(all, inc, a7, one);
    a8 = svmla_f32_x(all, inc, a8, one);
    a9 = svmla_f32_x(all, inc, a9, one);
    a10 = svmla_f32_x(all, inc, a10, one);
    a11 = svmla_f32_x(all, inc, a11, one);
  }
  const double sum = svaddv_f32(all, a0) + svaddv_f32(all, a1) + svaddv_f32(all, a2) +
                     svaddv_f32(all, a3) + svaddv_f32(all, a4) + svaddv_f32(all, a5) +
                     svaddv_f32(all, a6) + svaddv_f32(all, a7) + svaddv_f32(all, a8) +
                     svaddv_f32(all, a9) + svaddv_f32(all, a10) + svaddv_f32(all, a11);
  return sum / (12.0 * static_cast<double>(svcntw()));
}

}  // namespace tb::cpu
