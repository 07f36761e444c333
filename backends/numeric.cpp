#include "backends/numeric.h"

#include <cmath>
#include <random>

#include "backends/low_precision.h"

namespace tb {

std::vector<float> random_values(std::size_t count, std::uint64_t seed, DType dtype) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(rng);
  for (float& value : values) {
    if (dtype == DType::bf16) value = cpu::round_to_bf16(value);
    if (dtype == DType::f16) value = cpu::round_to_f16(value);
    if (dtype == DType::tf32) value = cpu::round_to_tf32(value);  // the op then rounds nothing
    if (dtype == DType::f8_e4m3) value = cpu::round_to_f8_e4m3(value);
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
