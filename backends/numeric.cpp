#include "backends/numeric.h"

#include <cmath>

#include "backends/low_precision.h"
#include "backends/seeded.h"

namespace tb {

std::vector<float> random_values(std::size_t count, std::uint64_t seed, DType dtype) {
  // Counter-based (value i from (seed, i) alone), so every thread fills its own share: a
  // full-size step's standalone products need billions of values.
  std::vector<float> values(count);
  const auto n = static_cast<std::int64_t>(count);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t bits = mix64(seed + static_cast<std::uint64_t>(i) * kGoldenGamma) >> 40;
    float value = static_cast<float>(bits) * 0x1.0p-23f - 1.0f;  // 24 bits: every value exact
    if (dtype == DType::bf16) value = cpu::round_to_bf16(value);
    if (dtype == DType::f16) value = cpu::round_to_f16(value);
    if (dtype == DType::tf32) value = cpu::round_to_tf32(value);  // the op then rounds nothing
    if (dtype == DType::f8_e4m3) value = cpu::round_to_f8_e4m3(value);
    values[static_cast<std::size_t>(i)] = value;
  }
  return values;
}

double relative_l2_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  const double error = std::sqrt(diff / std::max(norm, 1e-300));
  return std::isnan(error) ? INFINITY : error;
}

}  // namespace tb
