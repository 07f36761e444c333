#include "backends/ops.h"

#include <array>
#include <utility>

#include "backends/status.h"

namespace tb {
namespace {
constexpr std::array<std::pair<DType, std::string_view>, 7> kDTypeNames = {{
    {DType::f32, "f32"},
    {DType::tf32, "tf32"},
    {DType::bf16, "bf16"},
    {DType::f16, "f16"},
    {DType::f8_e4m3, "f8_e4m3"},
    {DType::f64, "f64"},
    {DType::i32, "i32"},
}};
}  // namespace

std::string_view dtype_name(DType dtype) {
  for (const auto& [value, name] : kDTypeNames)
    if (value == dtype) return name;
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  for (const auto& [value, known] : kDTypeNames)
    if (known == name) return value;
  throw UsageError("unknown dtype '" + std::string(name) +
                   "' (expected f32, tf32, bf16, f16, f8_e4m3, f64 or i32)");
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::tf32:
    case DType::i32:
      return 4;
    case DType::bf16:
    case DType::f16:
      return 2;
    case DType::f8_e4m3:
      return 1;
    case DType::f64:
      return 8;
  }
  return 0;
}

std::optional<DType> data_type(const OpDesc& op) {
  return std::visit(
      [](const auto& o) -> std::optional<DType> {
        if constexpr (requires { o.dtype; }) return o.dtype;
        return std::nullopt;
      },
      op);
}

std::string_view op_name(const OpDesc& op) {
  static constexpr std::array<std::string_view, std::variant_size_v<OpDesc>> kNames = {
      "gemm",       "conv",
      "stream",     "peak",
      "transfer",   "batch_norm",
      "eltwise",    "pool",
      "binary",     "fully_connected",
      "softmax",    "softmax_cross_entropy",
      "layer_norm", "embedding",
      "dropout",    "cast",
      "optimizer"};
  return kNames[op.index()];
}

}  // namespace tb
