#include "backends/operands.h"

namespace tb {

std::vector<OperandSpec> stream_operands(const StreamOp& op) {
  const std::size_t bytes = static_cast<std::size_t>(op.n) * sizeof(double);
  std::vector<OperandSpec> operands = {
      {"a", DType::f64, {op.n}, bytes, op.kernel == StreamKernel::triad},
      {"b", DType::f64, {op.n}, bytes, op.kernel == StreamKernel::scale},
      {"c",
       DType::f64,
       {op.n},
       bytes,
       op.kernel == StreamKernel::copy || op.kernel == StreamKernel::add}};
  if (op.kernel == StreamKernel::dot)
    operands.push_back({"result", DType::f64, {1}, sizeof(double), true});
  return operands;
}

std::vector<OperandSpec> gemm_operands(const GemmOp& op) {
  auto dims = [&](std::int64_t rows, std::int64_t cols) {
    return op.heads == 1 ? std::vector<std::int64_t>{op.batch, rows, cols}
                         : std::vector<std::int64_t>{op.batch, op.heads, rows, cols};
  };
  std::vector<OperandSpec> operands = {{"a", op.a_type, dims(op.m, op.k), 0, false},
                                       {"b", op.b_type, dims(op.k, op.n), 0, false},
                                       {"c", op.c_type, dims(op.m, op.n), 0, true}};
  for (OperandSpec& operand : operands)
    operand.bytes = operand.elements() * dtype_size(operand.dtype);
  return operands;
}

}  // namespace tb
