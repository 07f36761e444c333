// RMSNorm, Llama's normalisation (Zhang and Sennrich, 2019): each row's `cols` values divided
// by their root mean square, then scaled per column by gamma (no mean subtracted, no shift):
//   y = x * r * gamma,  r = 1 / sqrt(mean(x^2) + epsilon)  (per row)
//   backward, g = dy * gamma:  dx = r * (g - x r * mean(g * x r)),  dgamma = sum over rows dy * x r
// forward:  src [rows, cols], gamma [cols] -> dst, inverse_rms [rows] (r);
// backward: src, diff_dst, gamma, inverse_rms -> diff_src, diff_gamma.
// gamma, r and diff_gamma are f32 for low-precision data (fp32 master weights), f64 in f64.
//
// The op's room: its descriptor and operand list here (rms_norm.cpp), its CPU kernels and f64
// reference in backends/cpu_kernels/rms_norm.cpp, its CUDA kernels in backends/cuda/rms_norm.cu.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "backends/op_basics.h"
#include "backends/status.h"

namespace tb {

struct OperandSpec;

struct RmsNormOp {
  static constexpr std::string_view kName = "rms_norm";
  Pass pass = Pass::forward;
  std::int64_t rows = 0, cols = 0;
  float epsilon = 1e-5f;  // Llama 3's
  DType dtype = DType::f32;
};

// The dtype of gamma, r and diff_gamma.
constexpr DType rms_norm_parameter_dtype(const RmsNormOp& op) {
  return op.dtype == DType::f64 ? DType::f64 : DType::f32;
}

std::vector<OperandSpec> rms_norm_operands(const RmsNormOp& op);
// InvalidArgument unless rows >= 0, cols >= 1 and epsilon >= 0: what every backend's plan asks.
Status check_rms_norm(const RmsNormOp& op);

}  // namespace tb
