#include "models/host_values.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/low_precision.h"

namespace tb {
namespace {

// Conversions of more values than this run on every thread: a full-size step's operands are
// tens of millions of values, a small op's not worth the threads' start.
constexpr std::int64_t kParallelValues = std::int64_t{1} << 16;

}  // namespace

void to_bytes(const std::vector<double>& values, DType dtype, std::vector<char>* bytes) {
  bytes->resize(values.size() * dtype_size(dtype));
  char* out = bytes->data();
  const auto count = static_cast<std::int64_t>(values.size());
  auto narrow = [&]<typename T>(T) {
#pragma omp parallel for schedule(static) if (count > kParallelValues)
    for (std::int64_t i = 0; i < count; ++i) {
      T value;
      if constexpr (std::is_same_v<T, std::uint16_t>) {
        const float single = static_cast<float>(values[i]);
        value = dtype == DType::bf16 ? cpu::float_to_bf16(single) : cpu::float_to_f16(single);
      } else {
        value = static_cast<T>(values[i]);
      }
      std::memcpy(out + i * sizeof(T), &value, sizeof(T));
    }
  };
  if (dtype == DType::f64)
    std::memcpy(out, values.data(), bytes->size());
  else if (dtype == DType::i32)
    narrow(std::int32_t{});
  else if (dtype == DType::bf16 || dtype == DType::f16)
    narrow(std::uint16_t{});
  else
    narrow(float{});
}

std::vector<char> to_bytes(const std::vector<double>& values, DType dtype) {
  std::vector<char> bytes;
  to_bytes(values, dtype, &bytes);
  return bytes;
}

void from_bytes(const char* bytes, std::size_t count, DType dtype, std::vector<double>* values) {
  values->resize(count);
  double* out = values->data();
  auto widen = [&]<typename T>(T) {
#pragma omp parallel for schedule(static) if (count > kParallelValues)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(count); ++i) {
      T value;
      std::memcpy(&value, bytes + i * sizeof(T), sizeof(T));
      if constexpr (std::is_same_v<T, std::uint16_t>)
        out[i] = dtype == DType::bf16 ? cpu::bf16_to_float(value) : cpu::f16_to_float(value);
      else
        out[i] = static_cast<double>(value);
    }
  };
  if (dtype == DType::f64)
    std::memcpy(out, bytes, count * sizeof(double));
  else if (dtype == DType::bf16 || dtype == DType::f16)
    widen(std::uint16_t{});
  else if (dtype == DType::i32)
    widen(std::int32_t{});
  else
    widen(float{});
}

std::vector<double> from_bytes(const char* bytes, std::size_t count, DType dtype) {
  std::vector<double> values;
  from_bytes(bytes, count, dtype, &values);
  return values;
}

}  // namespace tb
