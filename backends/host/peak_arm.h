// The aarch64 peak probes that need instructions beyond the armv8-a baseline, each in a file
// of its own compiled with the flags that enable them (backends/host/CMakeLists.txt), called
// only where the CPU has the feature (ArmFeatures in isa.h). Same contract as peak.cpp's
// kernels: `iterations` steps of 12 independent chains, the mean lane value returned.
#pragma once

#include <cstdint>

namespace tb::cpu {

// SVE (peak_arm_sve.cpp, -march=armv8.2-a+sve): fmla z.s on the CPU's vector length.
double fma_sve(std::int64_t iterations, float one_value, float increment);
int sve_fp32_lanes();  // svcntw(): fp32 lanes per SVE vector
// BF16 (peak_arm_bf16.cpp, -march=armv8.6-a+bf16): bfmmla, 12 accumulators of 2x2 fp32 each
// gaining a 2x4 by 4x2 bf16 product (16 multiply-adds) per step.
double bfmmla_neon(std::int64_t iterations, float one_value, float increment);

}  // namespace tb::cpu
