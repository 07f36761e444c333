#include "backends/ops/rms_norm.h"

#include "backends/operands.h"

namespace tb {

std::vector<OperandSpec> rms_norm_operands(const RmsNormOp& op) {
  const std::vector<std::int64_t> data = {op.rows, op.cols}, column = {op.cols}, row = {op.rows};
  const DType t = op.dtype, p = rms_norm_parameter_dtype(op);
  if (op.pass == Pass::forward)
    return {plain_operand("src", t, data, false), plain_operand("gamma", p, column, false),
            plain_operand("dst", t, data, true), plain_operand("inverse_rms", p, row, true)};
  return {plain_operand("src", t, data, false),     plain_operand("diff_dst", t, data, false),
          plain_operand("gamma", p, column, false), plain_operand("inverse_rms", p, row, false),
          plain_operand("diff_src", t, data, true), plain_operand("diff_gamma", p, column, true)};
}

Status check_rms_norm(const RmsNormOp& op) {
  if (op.rows < 0 || op.cols < 1 || !(op.epsilon >= 0))
    return Status::InvalidArgument("rms_norm: rows >= 0, cols >= 1 and epsilon >= 0");
  return Status::Ok();
}

}  // namespace tb
