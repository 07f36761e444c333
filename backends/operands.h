// Operand lists that every backend shares because the op fixes them (plain layouts only).
#pragma once

#include <vector>

#include "backends/backend.h"

namespace tb {

// STREAM: a, b, c (n fp64 each), and for dot a one-element result; is_output marks the array
// the kernel writes.
std::vector<OperandSpec> stream_operands(const StreamOp& op);

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

}  // namespace tb
