// Operand lists that every backend shares because the op fixes them (plain layouts only).
#pragma once

#include <vector>

#include "backends/backend.h"

namespace tb {

// STREAM: a, b, c (n fp64 each), and for dot a one-element result; is_output marks the array
// the kernel writes.
std::vector<OperandSpec> stream_operands(const StreamOp& op);

// GEMM: a (op(A) as [batch, m, k]), b ([batch, k, n]), c ([batch, m, n]); with heads > 1 each
// gains a heads dimension after batch. Bytes as the operands are stored.
std::vector<OperandSpec> gemm_operands(const GemmOp& op);

}  // namespace tb
