#include "backends/numeric.h"

#include <cmath>
#include <random>

#include "backends/low_precision.h"
#include "backends/seeded.h"

namespace tb {

namespace {

// `value` rounded to `dtype`, so references see what the op sees.
float rounded_to(float value, DType dtype) {
  if (dtype == DType::bf16) return cpu::round_to_bf16(value);
  if (dtype == DType::f16) return cpu::round_to_f16(value);
  if (dtype == DType::tf32) return cpu::round_to_tf32(value);  // the op then rounds nothing
  if (dtype == DType::f8_e4m3) return cpu::round_to_f8_e4m3(value);
  return value;
}

}  // namespace

std::vector<float> random_values(std::size_t count, std::uint64_t seed, DType dtype) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = rounded_to(uniform(rng), dtype);
  return values;
}

std::vector<float> counter_values(std::size_t count, std::uint64_t seed, DType dtype) {
  std::vector<float> values(count);
  const auto n = static_cast<std::int64_t>(count);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t bits = mix64(seed + static_cast<std::uint64_t>(i) * kGoldenGamma) >> 40;
    // 24 bits: every value exact in float, uniform on [-1, 1).
    values[static_cast<std::size_t>(i)] =
        rounded_to(static_cast<float>(bits) * 0x1.0p-23f - 1.0f, dtype);
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
