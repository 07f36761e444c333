#include "models/host_values.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/low_precision.h"

namespace tb {

std::vector<char> to_bytes(const std::vector<double>& values, DType dtype) {
  std::vector<char> bytes(values.size() * dtype_size(dtype));
  if (dtype == DType::f64) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else if (dtype == DType::i32) {
    std::vector<std::int32_t> integers(values.begin(), values.end());
    std::memcpy(bytes.data(), integers.data(), bytes.size());
  } else if (dtype == DType::bf16 || dtype == DType::f16) {
    std::vector<std::uint16_t> narrow(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const float value = static_cast<float>(values[i]);
      narrow[i] = dtype == DType::bf16 ? cpu::float_to_bf16(value) : cpu::float_to_f16(value);
    }
    std::memcpy(bytes.data(), narrow.data(), bytes.size());
  } else {
    std::vector<float> narrow(values.begin(), values.end());
    std::memcpy(bytes.data(), narrow.data(), bytes.size());
  }
  return bytes;
}

void from_bytes(const char* bytes, std::size_t count, DType dtype, std::vector<double>* values) {
  values->resize(count);
  double* out = values->data();
  auto widen = [&]<typename T>(T) {
    for (std::size_t i = 0; i < count; ++i) {
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
