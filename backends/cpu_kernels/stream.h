// STREAM kernels (McCalpin): copy c=a, scale b=s*c, add c=a+b, triad a=b+s*c, dot sum(a*b),
// over fp64 arrays, OpenMP static schedule (the partition the first touch used).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace tb::cpu {

// Operands: a, b, c (n fp64 each) and, for dot, result (one fp64).
Status plan_stream(const StreamOp& op, std::unique_ptr<Plan>* out);

// Bytes STREAM counts per kernel: each array element read or written once, 8 bytes each.
double stream_bytes(const StreamOp& op);

}  // namespace tb::cpu
