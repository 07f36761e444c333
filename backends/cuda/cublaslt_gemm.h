// GEMM through cuBLASLt: fp32 (strict, no TF32), tf32, and bf16 / fp16 inputs on Tensor Cores
// with fp32 accumulation, strided-batched; the algorithm comes from cuBLASLt's heuristic and is
// recorded as the plan's implementation.
#pragma once

#include <cublasLt.h>

#include <memory>

#include "backends/backend.h"

namespace tb::cuda {

Status plan_cublaslt_gemm(cublasLtHandle_t handle, const GemmOp& op, std::unique_ptr<Plan>* out);

}  // namespace tb::cuda
