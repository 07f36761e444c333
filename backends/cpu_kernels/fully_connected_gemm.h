// A fully connected layer lowered onto a row-major fp32 GEMM, for backends whose library
// offers a BLAS-style sgemm (OpenBLAS's cblas_sgemm): one GEMM per direction, the bias added by
// the GEMM itself (beta = 1 on rows pre-filled with it) and its gradient a column sum, which
// cpu-onednn's matmul plans take too.
#pragma once

#include <cstdint>

#include "backends/backend.h"
#include "backends/operands.h"
#include "backends/status.h"

namespace tb::cpu {

// Row-major C = alpha op(A) op(B) + beta C, as a row-major BLAS sgemm takes it ('N' or 'T'); false
// when the library refused the call.
using RowMajorSgemm = bool (*)(char trans_a, char trans_b, std::int64_t m, std::int64_t n,
                               std::int64_t k, float alpha, const float* a, std::int64_t lda,
                               const float* b, std::int64_t ldb, float beta, float* c,
                               std::int64_t ldc);

// A bias gradient: sums[c] = the sum over `rows` of column c of the row-major `diff_dst` (fp32,
// or the bits of a 16-bit `dtype`, bf16 or f16), added in double.
void column_sums(const float* diff_dst, std::int64_t rows, std::int64_t cols, float* sums);
void column_sums(const std::uint16_t* diff_dst, DType dtype, std::int64_t rows, std::int64_t cols,
                 float* sums);

// Operands by the names fully_connected_operands(op) declares.
Status fully_connected_with_gemm(const FullyConnectedOp& op, const BoundOperands& operands,
                                 RowMajorSgemm sgemm);

}  // namespace tb::cpu
