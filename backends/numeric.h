// Numeric helpers every layer's checks share: seeded inputs and the relative error measure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/ops.h"

namespace tb {

// Seeded uniform values in [-1, 1), rounded to `dtype` so references see what the op sees.
std::vector<float> random_values(std::size_t count, std::uint64_t seed, DType dtype);
// The same distribution, counter-based (value i from seed and i alone) and so filled by every
// thread: for inputs too large for one thread's generator (a step's products timed alone).
std::vector<float> counter_values(std::size_t count, std::uint64_t seed, DType dtype);

// ||got - want|| / ||want|| (L2 norms); infinite when got holds a NaN.
double relative_l2_error(const std::vector<double>& got, const std::vector<double>& want);

}  // namespace tb
