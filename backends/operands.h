// Operand lists that every backend shares because the op fixes them (plain layouts only).
#pragma once

#include <vector>

#include "backends/backend.h"

namespace tb {

// STREAM: a, b, c (n fp64 each), and for dot a one-element result; is_output marks the array
// the kernel writes.
std::vector<OperandSpec> stream_operands(const StreamOp& op);

}  // namespace tb
