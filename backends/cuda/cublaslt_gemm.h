// GEMM through cuBLASLt: fp32 (strict, no TF32), tf32, bf16 / fp16 and FP8 (e4m3, device-side
// scales, fast accumulation as an option) inputs on Tensor Cores with fp32 accumulation,
// strided-batched; the algorithm comes from cuBLASLt's heuristic and is recorded as the plan's
// implementation.
#pragma once

#include <cublasLt.h>

#include <memory>

#include "backends/backend.h"

namespace tb::cuda {

// `compute_capability` (major * 10 + minor) decides whether FP8 runs (8.9 and later).
Status plan_cublaslt_gemm(cublasLtHandle_t handle, const GemmOp& op, std::unique_ptr<Plan>* out,
                          int compute_capability = 0);

// Whether cuBLASLt runs this FP8 GEMM here: compute capability 8.9 or later, the TN layout
// (ta=n, tb=t), dimensions multiples of 16. Device-independent.
Status fp8_supported(const GemmOp& op, int compute_capability);

}  // namespace tb::cuda
