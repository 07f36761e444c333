// What every op descriptor is made of: the dtypes data is stored in and the pass an op runs.
// Split from ops.h so that an op's own header (backends/ops/<op>.h) can declare its descriptor.
#pragma once

#include <cstddef>
#include <string_view>

namespace tb {

enum class DType { f32, tf32, bf16, f16, f8_e4m3, f64, i32 };

std::string_view dtype_name(DType dtype);
// Throws UsageError for a name that is not a dtype.
DType parse_dtype(std::string_view name);
std::size_t dtype_size(DType dtype);
// The dtype data of `dtype` is stored as: TF32 lives in f32 storage, the rest as themselves.
constexpr DType storage_dtype(DType dtype) {
  return dtype == DType::tf32 ? DType::f32 : dtype;
}
// Half the distance between 1 and the next value stored in `dtype`: the largest relative
// error of rounding to it (0 for integers; TF32 as its f32 storage).
constexpr double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return 0x1p-8;
    case DType::f16:
      return 0x1p-11;
    case DType::f8_e4m3:
      return 0x1p-4;
    case DType::f64:
      return 0x1p-53;
    case DType::i32:
      return 0;
    default:
      return 0x1p-24;
  }
}

enum class Pass { forward, backward };

}  // namespace tb
