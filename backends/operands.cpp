#include "backends/operands.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace tb {
namespace {

OperandSpec spec(std::string name, DType dtype, std::vector<std::int64_t> dims, bool is_output,
                 OperandRole role = OperandRole::value) {
  return plain_operand(std::move(name), dtype, std::move(dims), is_output, role);
}

constexpr OperandRole kInPlace = OperandRole::updated_in_place;
constexpr OperandRole kRunning = OperandRole::running_statistic;
constexpr OperandRole kWorkspace = OperandRole::workspace;

}  // namespace

OperandSpec plain_operand(std::string name, DType dtype, std::vector<std::int64_t> dims,
                          bool is_output, OperandRole role) {
  OperandSpec operand{std::move(name), dtype, std::move(dims), 0, is_output};
  operand.bytes = operand.elements() * dtype_size(dtype);
  operand.role = role;
  return operand;
}

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

std::vector<OperandSpec> peak_operands(std::int64_t workers) {
  return {spec("per_worker", DType::f64, {workers}, true)};
}

std::vector<OperandSpec> transfer_operands(const TransferOp& op) {
  const MemoryKind host = op.pinned ? MemoryKind::host_pinned : MemoryKind::host_pageable;
  const std::size_t bytes = static_cast<std::size_t>(op.bytes);
  std::vector<OperandSpec> operands = {spec("source", DType::f32, {op.bytes / 4}, false),
                                       spec("destination", DType::f32, {op.bytes / 4}, true)};
  for (OperandSpec& operand : operands) operand.bytes = bytes;
  operands[0].memory =
      op.direction == TransferDirection::host_to_device ? host : MemoryKind::device;
  operands[1].memory =
      op.direction == TransferDirection::device_to_host ? host : MemoryKind::device;
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

std::vector<OperandSpec> batch_norm_operands(const BatchNormOp& op) {
  const std::vector<std::int64_t> data = {op.mb, op.channels, op.h, op.w}, channel = {op.channels};
  // Statistics, scale and shift stay fp32 for low-precision data (fp64 for the reference).
  const DType t = op.dtype, c = t == DType::f64 ? t : DType::f32;
  std::vector<OperandSpec> operands;
  if (op.inference)
    return {spec("src", t, data, false),
            spec("gamma", c, channel, false),
            spec("beta", c, channel, false),
            spec("running_mean", c, channel, false, kRunning),
            spec("running_var", c, channel, false, kRunning),
            spec("dst", t, data, true)};
  if (op.pass == Pass::forward) {
    operands = {spec("src", t, data, false),
                spec("gamma", c, channel, false),
                spec("beta", c, channel, false),
                spec("dst", t, data, true),
                spec("mean", c, channel, true),
                spec("variance", c, channel, true),
                spec("running_mean", c, channel, true, kRunning),
                spec("running_var", c, channel, true, kRunning)};
    if (op.fuse_relu) operands.push_back(spec("relu_mask", DType::i32, data, true, kWorkspace));
  } else {
    // beta is unused by the math but oneDNN 2.x's primitive takes it.
    operands = {spec("src", t, data, false),      spec("diff_dst", t, data, false),
                spec("gamma", c, channel, false), spec("beta", c, channel, false),
                spec("mean", c, channel, false),  spec("variance", c, channel, false)};
    if (op.fuse_relu) operands.push_back(spec("relu_mask", DType::i32, data, false, kWorkspace));
    operands.push_back(spec("diff_src", t, data, true));
    operands.push_back(spec("diff_gamma", c, channel, true));
    operands.push_back(spec("diff_beta", c, channel, true));
  }
  return operands;
}

std::vector<OperandSpec> eltwise_operands(const EltwiseOp& op) {
  const std::vector<std::int64_t> dims = {op.count};
  if (op.pass == Pass::forward)
    return {spec("src", op.dtype, dims, false), spec("dst", op.dtype, dims, true)};
  // ReLU's and tanh's gradients are known from their output, GELU's needs its input.
  return {spec(op.kind == EltwiseKind::gelu ? "src" : "dst", op.dtype, dims, false),
          spec("diff_dst", op.dtype, dims, false), spec("diff_src", op.dtype, dims, true)};
}

std::vector<OperandSpec> layer_norm_operands(const LayerNormOp& op) {
  const std::vector<std::int64_t> data = {op.rows, op.cols}, column = {op.cols}, row = {op.rows};
  const DType t = op.dtype, c = t == DType::f64 ? t : DType::f32;
  if (op.pass == Pass::forward)
    return {spec("src", t, data, false),    spec("gamma", c, column, false),
            spec("beta", c, column, false), spec("dst", t, data, true),
            spec("mean", c, row, true),     spec("variance", c, row, true)};
  return {spec("src", t, data, false),       spec("diff_dst", t, data, false),
          spec("gamma", c, column, false),   spec("beta", c, column, false),
          spec("mean", c, row, false),       spec("variance", c, row, false),
          spec("diff_src", t, data, true),   spec("diff_gamma", c, column, true),
          spec("diff_beta", c, column, true)};
}

std::vector<OperandSpec> optimizer_operands(const OptimizerOp& op) {
  const std::vector<std::int64_t> dims = {op.count};
  std::vector<OperandSpec> operands = {spec("weights", op.dtype, dims, true, kInPlace),
                                       spec("grads", op.dtype, dims, false)};
  if (op.kind == OptimizerKind::sgd_momentum) {
    operands.push_back(spec("momentum", op.dtype, dims, true, kInPlace));
  } else {
    operands.push_back(spec("m", op.dtype, dims, true, kInPlace));
    operands.push_back(spec("v", op.dtype, dims, true, kInPlace));
  }
  if (op.kind == OptimizerKind::lamb)
    operands.push_back(spec("tensor_offsets", DType::i32, {op.tensors + 1}, false));
  const int hyper = op.kind == OptimizerKind::sgd_momentum ? kSgdHyperCount : kAdamHyperCount;
  operands.push_back(spec("hyper", DType::f32, {hyper}, false));
  operands.back().memory = MemoryKind::host_pageable;  // changes every step
  return operands;
}

std::vector<OperandSpec> pool_operands(const PoolOp& op) {
  const std::vector<std::int64_t> src = {op.mb, op.channels, op.ih, op.iw},
                                  dst = {op.mb, op.channels, op.oh(), op.ow()};
  const bool max = op.kind == PoolKind::max;
  if (op.pass == Pass::forward) {
    std::vector<OperandSpec> operands = {spec("src", op.dtype, src, false),
                                         spec("dst", op.dtype, dst, true)};
    if (max) operands.push_back(spec("indices", DType::i32, dst, true, kWorkspace));
    return operands;
  }
  std::vector<OperandSpec> operands = {spec("diff_dst", op.dtype, dst, false)};
  if (max) operands.push_back(spec("indices", DType::i32, dst, false, kWorkspace));
  operands.push_back(spec("diff_src", op.dtype, src, true));
  return operands;
}

std::vector<OperandSpec> conv_operands(const ConvOp& op) {
  const std::vector<std::int64_t> src = {op.mb, op.ic, op.ih, op.iw},
                                  weights = {op.oc, op.ic, op.kh, op.kw},
                                  dst = {op.mb, op.oc, op.oh(), op.ow()};
  const DType t = op.dtype;
  switch (op.direction) {
    case ConvDirection::forward:
      if (op.epilogue != ConvEpilogue::none)
        return {spec("src", t, src, false), spec("weights", t, weights, false),
                spec("bias", t, {op.oc}, false), spec("dst", t, dst, true)};
      return {spec("src", t, src, false), spec("weights", t, weights, false),
              spec("dst", t, dst, true)};
    case ConvDirection::backward_data:
      return {spec("diff_dst", t, dst, false), spec("weights", t, weights, false),
              spec("diff_src", t, src, true)};
    case ConvDirection::backward_weights:
      // Weight gradients stay fp32 for low-precision training (fp32 master weights).
      return {spec("src", t, src, false), spec("diff_dst", t, dst, false),
              spec("diff_weights", t == DType::f64 ? t : DType::f32, weights, true)};
  }
  return {};
}

std::vector<OperandSpec> fully_connected_operands(const FullyConnectedOp& op) {
  const std::vector<std::int64_t> src = {op.mb, op.in}, weights = {op.out, op.in}, bias = {op.out},
                                  dst = {op.mb, op.out};
  const DType t = op.dtype, grad = t == DType::f64 ? t : DType::f32;
  switch (op.direction) {
    case ConvDirection::forward:
      return {spec("src", t, src, false), spec("weights", t, weights, false),
              spec("bias", t, bias, false), spec("dst", t, dst, true)};
    case ConvDirection::backward_data:
      return {spec("diff_dst", t, dst, false), spec("weights", t, weights, false),
              spec("diff_src", t, src, true)};
    case ConvDirection::backward_weights:
      return {spec("src", t, src, false), spec("diff_dst", t, dst, false),
              spec("diff_weights", grad, weights, true), spec("diff_bias", grad, bias, true)};
  }
  return {};
}

std::vector<OperandSpec> softmax_operands(const SoftmaxOp& op) {
  const std::vector<std::int64_t> dims = {op.rows, op.cols};
  if (op.pass == Pass::backward)
    return {spec("dst", op.dtype, dims, false), spec("diff_dst", op.dtype, dims, false),
            spec("diff_src", op.dtype, dims, true)};
  std::vector<OperandSpec> operands = {spec("src", op.dtype, dims, false)};
  if (op.masked)
    operands.push_back(spec("mask", DType::f32, {op.rows / op.rows_per_mask, op.cols}, false));
  operands.push_back(spec("dst", op.dtype, dims, true));
  return operands;
}

std::vector<OperandSpec> embedding_operands(const EmbeddingOp& op) {
  const std::vector<std::int64_t> table = {op.vocab, op.dim}, rows = {op.tokens, op.dim},
                                  ids = {op.tokens};
  if (op.pass == Pass::forward)
    return {spec("table", op.dtype, table, false), spec("ids", DType::i32, ids, false),
            spec("dst", op.dtype, rows, true)};
  return {spec("diff_dst", op.dtype, rows, false), spec("ids", DType::i32, ids, false),
          spec("diff_table", embedding_table_grad_dtype(op), table, true,
               op.accumulate ? OperandRole::accumulated : OperandRole::value)};
}

std::vector<OperandSpec> binary_operands(const BinaryOp& op) {
  const std::vector<std::int64_t> dims = {op.count};
  return {spec("src0", op.dtype, dims, false), spec("src1", op.dtype, dims, false),
          spec("dst", op.dtype, dims, true)};
}

std::vector<OperandSpec> softmax_cross_entropy_operands(const SoftmaxCrossEntropyOp& op) {
  const std::vector<std::int64_t> logits = {op.rows, op.classes}, labels = {op.rows};
  if (op.pass == Pass::forward)
    return {spec("logits", op.dtype, logits, false), spec("labels", DType::i32, labels, false),
            spec("probabilities", op.dtype, logits, true), spec("loss", op.dtype, {1}, true)};
  std::vector<OperandSpec> operands = {spec("probabilities", op.dtype, logits, false),
                                       spec("labels", DType::i32, labels, false)};
  if (op.scaled) {
    operands.push_back(spec("scale", DType::f32, {1}, false));
    operands.back().memory = MemoryKind::host_pageable;  // changes between steps
  }
  operands.push_back(spec("diff_logits", op.dtype, logits, true));
  return operands;
}

std::vector<OperandSpec> unscale_gradients_operands(const UnscaleGradientsOp& op) {
  std::vector<OperandSpec> operands = {spec("grads", op.dtype, {op.count}, true, kInPlace),
                                       spec("inverse_scale", DType::f32, {1}, false),
                                       spec("found_nonfinite", DType::i32, {1}, true)};
  operands[1].memory = MemoryKind::host_pageable;  // changes between steps
  return operands;
}

std::vector<OperandSpec> dropout_operands(const DropoutOp& op) {
  const std::vector<std::int64_t> dims = {op.count};
  const bool forward = op.pass == Pass::forward;
  std::vector<OperandSpec> operands = {spec(forward ? "src" : "diff_dst", op.dtype, dims, false),
                                       spec("step", DType::i32, {1}, false),
                                       spec(forward ? "dst" : "diff_src", op.dtype, dims, true)};
  operands[1].memory = MemoryKind::host_pageable;  // changes every step
  return operands;
}

std::vector<OperandSpec> cast_operands(const CastOp& op) {
  return {spec("src", op.from, {op.count}, false), spec("dst", op.to, {op.count}, true)};
}

std::vector<OperandSpec> attention_operands(const AttentionOp& op) {
  const std::vector<std::int64_t> rows = {op.batch, op.sequence, op.heads, op.head_dim};
  const DType stats_dtype = op.dtype == DType::f64 ? DType::f64 : DType::f32;
  std::vector<OperandSpec> operands = {
      spec("q", op.dtype, rows, false), spec("k", op.dtype, rows, false),
      spec("v", op.dtype, rows, false), spec("key_lengths", DType::i32, {op.batch}, false)};
  const bool forward = op.pass == Pass::forward;
  operands.push_back(spec("out", op.dtype, rows, forward));
  operands.push_back(spec("stats", stats_dtype, {op.batch, op.heads, op.sequence}, forward));
  if (forward) return operands;
  operands.push_back(spec("diff_out", op.dtype, rows, false));
  for (const char* name : {"diff_q", "diff_k", "diff_v"})
    operands.push_back(spec(name, op.dtype, rows, true));
  return operands;
}

std::optional<int> find_operand(std::span<const OperandSpec> specs, std::string_view name) {
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == name) return static_cast<int>(i);
  return std::nullopt;
}

int operand_index(std::span<const OperandSpec> specs, std::string_view name) {
  if (const std::optional<int> index = find_operand(specs, name)) return *index;
  std::string declared;
  for (const OperandSpec& spec : specs) declared += (declared.empty() ? "" : ", ") + spec.name;
  throw std::logic_error(fmt::format("no operand '{}' among the op's ({})", name, declared));
}

BoundOperands::BoundOperands(std::span<const OperandSpec> specs, std::span<const Buffer> buffers)
    : specs_(specs), buffers_(buffers) {
  if (buffers.size() < specs.size())
    throw std::logic_error(fmt::format("{} buffers for {} operands", buffers.size(), specs.size()));
}

const OperandSpec& BoundOperands::spec(std::string_view name) const {
  return specs_[static_cast<std::size_t>(operand_index(specs_, name))];
}

const Buffer& BoundOperands::buffer(std::string_view name) const {
  return buffers_[static_cast<std::size_t>(operand_index(specs_, name))];
}

const Buffer& BoundOperands::output_buffer(std::string_view name) const {
  const int index = operand_index(specs_, name);
  if (!specs_[static_cast<std::size_t>(index)].is_output)
    throw std::logic_error(fmt::format("operand '{}' is an input, not written", name));
  return buffers_[static_cast<std::size_t>(index)];
}

Status Backend::gather_operand(const Plan& plan, int index, Buffer device,
                               std::span<const std::int64_t> positions, void* values) {
  const OperandSpec& spec = plan.operands().at(static_cast<std::size_t>(index));
  const std::size_t size = dtype_size(spec.dtype);
  std::vector<char> whole(spec.elements() * size);
  TB_RETURN_IF_ERROR(export_operand(plan, index, device, whole.data()));
  return gather_plain(whole.data(), spec, positions, values);
}

Status Backend::fill_operand(const Plan& plan, int index, Buffer buffer, std::uint64_t seed) {
  (void)buffer, (void)seed;
  return Status::Unimplemented(
      fmt::format("{} fills {} on the host", name(), plan.operands().at(index).name));
}

Status gather_plain(const void* plain, const OperandSpec& spec,
                    std::span<const std::int64_t> positions, void* values) {
  const std::size_t size = dtype_size(spec.dtype);
  const auto elements = static_cast<std::int64_t>(spec.elements());
  for (std::size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] < 0 || positions[i] >= elements)
      return Status::InvalidArgument(fmt::format("position {} is outside operand {} ({} elements)",
                                                 positions[i], spec.name, elements));
    std::memcpy(static_cast<char*>(values) + i * size,
                static_cast<const char*>(plain) + static_cast<std::size_t>(positions[i]) * size,
                size);
  }
  return Status::Ok();
}

}  // namespace tb
