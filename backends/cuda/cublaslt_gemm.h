// GEMM through cuBLASLt: fp32 (strict, no TF32), tf32, bf16 / fp16 and FP8 (e4m3, device-side
// scales, fast accumulation as an option) inputs on Tensor Cores with fp32 accumulation,
// strided-batched; the algorithm comes from cuBLASLt's heuristic and is recorded as the plan's
// implementation.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <memory>

#include "backends/backend.h"

namespace tb::cuda {

// How cuBLASLt sees a row-major GEMM. Row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T, so cuBLASLt's A is this op's B and its B this op's A, m and n swapped.
// Each call runs a strided batch of `count`; `calls` calls (one per batch entry when the heads
// are interleaved) are offset by `call_stride` elements of this op's a, b and c.
// Device-independent.
struct LtMatrix {
  std::int64_t rows = 0, cols = 0, ld = 0;  // column-major, as stored
  std::int64_t batch_stride = 0;            // elements between a batch's matrices
  bool transposed = false;                  // the op cuBLASLt applies
};
struct LtGemmShape {
  LtMatrix first, second, output;  // cuBLASLt's A (this op's B), B (this op's A), C and D
  std::int64_t count = 1, calls = 1;
  std::int64_t call_stride[3] = {};
};
LtGemmShape lt_gemm_shape(const GemmOp& op);

// What cuBLASLt fuses after the product, for fully connected layers: `bias` adds a bias to
// every row of the row-major C = op(A) op(B) (one value per column n: cuBLASLt's EPILOGUE_BIAS
// on the column-major transpose); `bias_gradient` also writes the sums of op(A)'s rows over k
// (one value per row m, in f32: EPILOGUE_BGRADB, since op(A) is cuBLASLt's B). Either adds
// one operand after a, b and c.
enum class LtEpilogue { none, bias, bias_gradient };

// The epilogue's operand ("bias" [n] in C's dtype, or "diff_bias" [m] in f32), or
// Unimplemented for a batched or head-interleaved GEMM. Device-independent.
Status epilogue_operand(const GemmOp& op, LtEpilogue epilogue, OperandSpec* out);

// `compute_capability` (major * 10 + minor) decides whether FP8 runs (8.9 and later).
// Unimplemented when cuBLASLt has no algorithm for the GEMM with that epilogue. The epilogue's
// operand must be 16-byte aligned (checked at every execution).
Status plan_cublaslt_gemm(cublasLtHandle_t handle, const GemmOp& op, std::unique_ptr<Plan>* out,
                          int compute_capability = 0, LtEpilogue epilogue = LtEpilogue::none);

// Whether cuBLASLt runs this FP8 GEMM here: compute capability 8.9 or later, the TN layout
// (ta=n, tb=t), dimensions multiples of 16. Device-independent.
Status fp8_supported(const GemmOp& op, int compute_capability);

}  // namespace tb::cuda
