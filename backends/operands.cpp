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

}  // namespace tb
