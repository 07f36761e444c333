// Host data of any operand dtype as doubles and back: what exchanging values with a plan's
// plain operands takes (bf16 and f16 rounded to nearest even, i32 as integers).
#pragma once

#include <cstddef>
#include <vector>

#include "backends/ops.h"

namespace tb {

std::vector<char> to_bytes(const std::vector<double>& values, DType dtype);
// The same into `bytes`, reusing its storage (as from_bytes below).
void to_bytes(const std::vector<double>& values, DType dtype, std::vector<char>* bytes);
// Widens `count` values of `dtype` into `values`, reusing its storage: a large output read
// back every evaluation then faults its pages in once, not on every read.
void from_bytes(const char* bytes, std::size_t count, DType dtype, std::vector<double>* values);
std::vector<double> from_bytes(const char* bytes, std::size_t count, DType dtype);

}  // namespace tb
