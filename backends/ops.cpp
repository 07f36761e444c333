#include "backends/ops.h"

#include <array>
#include <type_traits>
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

GemmOperandLayout gemm_layout(const GemmOp& op, GemmOperand which) {
  const bool transposed = which == GemmOperand::a   ? op.trans_a
                          : which == GemmOperand::b ? op.trans_b
                                                    : false;
  const bool interleaved = which == GemmOperand::a   ? op.a_interleaved
                           : which == GemmOperand::b ? op.b_interleaved
                                                     : op.c_interleaved;
  const std::int64_t rows = which == GemmOperand::b ? op.k : op.m;
  const std::int64_t cols = which == GemmOperand::a ? op.k : op.n;
  // The stored matrix is the transpose of the logical one when the operand is transposed.
  const std::int64_t stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
  GemmOperandLayout layout;
  layout.ld = interleaved ? op.heads * stored_cols : stored_cols;
  layout.head = interleaved ? stored_cols : stored_rows * stored_cols;
  layout.batch = op.heads * stored_rows * stored_cols;
  layout.row = transposed ? 1 : layout.ld;
  layout.col = transposed ? layout.ld : 1;
  return layout;
}

std::optional<DType> data_type(const OpDesc& op) {
  return std::visit(
      [](const auto& o) -> std::optional<DType> {
        if constexpr (requires { o.dtype; }) return o.dtype;
        if constexpr (requires { o.a_type; }) return o.a_type;  // GEMM: its input dtype
        return std::nullopt;
      },
      op);
}

std::string_view op_name(const OpDesc& op) {
  return std::visit([](const auto& o) { return std::decay_t<decltype(o)>::kName; }, op);
}

bool is_linear_product(const OpDesc& op) {
  return std::visit(
      [](const auto& o) {
        return requires {
          o.multiply_adds();
        };
      },
      op);
}

std::int64_t multiply_adds(const OpDesc& op) {
  return std::visit(
      [](const auto& o) -> std::int64_t {
        if constexpr (requires { o.multiply_adds(); }) return o.multiply_adds();
        return 0;
      },
      op);
}

double product_flops(const OpDesc& op) {
  return std::visit(
      [](const auto& o) -> double {
        if constexpr (requires { o.flops(); }) return o.flops();
        if constexpr (requires { o.multiply_adds(); })
          return 2.0 * static_cast<double>(o.multiply_adds());
        return 0.0;
      },
      op);
}

GemmOp fully_connected_gemm(const FullyConnectedOp& op) {
  GemmOp gemm;
  gemm.a_type = gemm.b_type = op.dtype;
  gemm.c_type = storage_dtype(op.dtype);  // a TF32 product is written as f32
  switch (op.direction) {
    case ConvDirection::forward:  // [mb, in] x [out, in]^T
      gemm.m = op.mb, gemm.n = op.out, gemm.k = op.in, gemm.trans_b = true;
      break;
    case ConvDirection::backward_data:  // [mb, out] x [out, in]
      gemm.m = op.mb, gemm.n = op.in, gemm.k = op.out;
      break;
    case ConvDirection::backward_weights:  // [mb, out]^T x [mb, in], fp32 master gradients
      gemm.m = op.out, gemm.n = op.in, gemm.k = op.mb, gemm.trans_a = true;
      gemm.c_type = DType::f32;
      break;
  }
  return gemm;
}

}  // namespace tb
