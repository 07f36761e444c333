// Operand lists that every backend shares because the op fixes them (plain layouts only).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"

namespace tb {

// An operand in the op's plain layout: its bytes are its elements' (an op's declaration builds
// its list of them).
OperandSpec plain_operand(std::string name, DType dtype, std::vector<std::int64_t> dims,
                          bool is_output, OperandRole role = OperandRole::value);

// STREAM: a, b, c (n fp64 each), and for dot a one-element result; is_output marks the array
// the kernel writes.
std::vector<OperandSpec> stream_operands(const StreamOp& op);

// The peak probes: one f64 result per worker (a CPU thread or a GPU block), written.
std::vector<OperandSpec> peak_operands(std::int64_t workers);

// A copy between memories: source (read) and destination (written), in the memory each
// direction names (`pinned` or pageable on the host side).
std::vector<OperandSpec> transfer_operands(const TransferOp& op);

// GEMM: a (op(A) as [batch, m, k]), b ([batch, k, n]), c ([batch, m, n]); with heads > 1 each
// gains a heads dimension after batch. Bytes as the operands are stored.
std::vector<OperandSpec> gemm_operands(const GemmOp& op);

// The training ops' operands (ops.h says what each is). Every backend lists them the same way;
// a library backend may store them in its own layout (OperandSpec::bytes).
std::vector<OperandSpec> batch_norm_operands(const BatchNormOp& op);
std::vector<OperandSpec> eltwise_operands(const EltwiseOp& op);
std::vector<OperandSpec> layer_norm_operands(const LayerNormOp& op);
std::vector<OperandSpec> optimizer_operands(const OptimizerOp& op);
std::vector<OperandSpec> pool_operands(const PoolOp& op);
std::vector<OperandSpec> conv_operands(const ConvOp& op);
std::vector<OperandSpec> fully_connected_operands(const FullyConnectedOp& op);
std::vector<OperandSpec> softmax_operands(const SoftmaxOp& op);
std::vector<OperandSpec> embedding_operands(const EmbeddingOp& op);
std::vector<OperandSpec> binary_operands(const BinaryOp& op);
std::vector<OperandSpec> softmax_cross_entropy_operands(const SoftmaxCrossEntropyOp& op);
std::vector<OperandSpec> dropout_operands(const DropoutOp& op);
std::vector<OperandSpec> cast_operands(const CastOp& op);
std::vector<OperandSpec> unscale_gradients_operands(const UnscaleGradientsOp& op);
std::vector<OperandSpec> attention_operands(const AttentionOp& op);

// Where the operand called `name` sits in `specs` (the order execute() takes them), if declared.
std::optional<int> find_operand(std::span<const OperandSpec> specs, std::string_view name);
// As find_operand, for an operand the op always declares: throws std::logic_error naming it
// otherwise (the declaration and its user disagree, a programming error).
int operand_index(std::span<const OperandSpec> specs, std::string_view name);

// An op's buffers bound to its declared operands by name, so that no code outside the
// declarations above depends on the order execute() takes them in: `b.in<float>("src")`,
// `b.out<float>("diff_src")`, `b.out_if<std::int32_t>("relu_mask")` (null when not declared).
// Reading an undeclared name, or writing an operand declared as an input, throws
// std::logic_error.
class BoundOperands {
 public:
  BoundOperands(std::span<const OperandSpec> specs, std::span<const Buffer> buffers);

  bool has(std::string_view name) const { return find_operand(specs_, name).has_value(); }
  const OperandSpec& spec(std::string_view name) const;
  const Buffer& buffer(std::string_view name) const;
  // The buffer of an output, checked to be declared one.
  const Buffer& output_buffer(std::string_view name) const;

  template <typename T>
  const T* in(std::string_view name) const {
    return static_cast<const T*>(buffer(name).data);
  }
  template <typename T>
  T* out(std::string_view name) const {
    return static_cast<T*>(output_buffer(name).data);
  }
  template <typename T>
  const T* in_if(std::string_view name) const {
    return has(name) ? in<T>(name) : nullptr;
  }
  template <typename T>
  T* out_if(std::string_view name) const {
    return has(name) ? out<T>(name) : nullptr;
  }

 private:
  std::span<const OperandSpec> specs_;
  std::span<const Buffer> buffers_;
};

// The elements at `positions` of an operand held plain at `plain`, one element of its dtype each,
// into `values` (Backend::gather_operand's copy); a position outside it is InvalidArgument.
Status gather_plain(const void* plain, const OperandSpec& spec,
                    std::span<const std::int64_t> positions, void* values);

}  // namespace tb
