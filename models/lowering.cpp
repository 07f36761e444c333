// Lowering: a Network's layers as ops planned on the step's backend, on slots that
// step_memory.* places. One function per layer kind writes that layer's forward and backward
// ops (as llm.c has one function per layer); build() routes the tensors and gradients
// between them, orders backward and adds the optimizer.
#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "backends/operands.h"
#include "backends/seeded.h"
#include "models/training_step_impl.h"

namespace tb {
namespace {

using Impl = TrainingStep::Impl;

constexpr std::int64_t kParamAlignment = 16;  // elements: every parameter starts on 64 bytes

// How tensors and their gradients travel between layers, decided before any layer is lowered.
struct Routing {
  // Each tensor's dtype: index inputs i32, an attention mask the statistics' dtype, other
  // inputs the compute dtype, every other tensor the dtype of the layer that produces it.
  std::vector<DType> tensor_dtype;
  std::vector<std::vector<std::pair<int, int>>> consumers;  // per tensor: (layer, input) readers
  // Where each reader's gradient for its input goes, by (layer, input).
  std::map<std::pair<int, int>, int> target;
  std::vector<int> join_diff;  // per layer: a residual join's one gradient buffer (-1: none)
  // Per parameter: the last layer that reads it (tied weights: its backward runs first).
  std::vector<int> last_user;
};

// One layer being lowered: the slots its ops read and write, and where they go.
struct LayerOps {
  Impl& step;
  const Routing& routing;
  int l;  // the layer's index
  const Layer& layer;
  const TensorShape &x, &y;  // first input, output
  DType dtype;               // the layer's compute dtype
  bool has_grad;             // the first input is not a network input: it gets a gradient
  int input;                 // the first input as the layer reads it (a converted copy or not)
  int output, output_grad;   // the output's value and gradient slots
  int cast_diff = -1;        // with a converted input: its gradient before the cast back

  int new_slot(std::size_t bytes = 0) { return step.memory.new_slot(bytes); }
  int input_value(int k) const { return step.value[layer.inputs.at(k)]; }  // unconverted
  int input_grad(int k) const {  // where the gradient for input k goes
    return cast_diff >= 0 && k == 0 ? cast_diff : routing.target.at({l, k});
  }
  int weight(int k) {  // parameter k as the layer reads it (the compute copy where mixed)
    const PrecisionPolicy& policy = step.policy;
    const bool copy = policy.mixed() && policy.weight_dtype(layer.kind) == policy.compute;
    return copy ? step.param_slot(step.compute_params_slot, layer.params.at(k), policy.compute)
                : step.param_slot(step.params_slot, layer.params.at(k), policy.master);
  }
  int weight_grad(int k) {
    return step.param_slot(step.grads_slot, layer.params.at(k), step.policy.master);
  }
  Status forward(const OpDesc& op, const NamedSlots& operands) {
    return step.add_op(step.forward, op, operands, l, Phase::forward);
  }
  Status backward(const OpDesc& op, const NamedSlots& operands) {
    if (step.options.evaluation) return Status::Ok();
    return step.add_op(step.backward, op, operands, l, Phase::backward);
  }
};

// A normalization's operands, which batch and layer norm name alike: forward writes the
// batch's statistics, backward reads them.
NamedSlots normalization_forward(LayerOps& ops, int mean, int variance) {
  return {{"src", ops.input},  {"gamma", ops.weight(0)}, {"beta", ops.weight(1)},
          {"dst", ops.output}, {"mean", mean},           {"variance", variance}};
}
NamedSlots normalization_backward(LayerOps& ops, int mean, int variance) {
  return {{"src", ops.input},
          {"diff_dst", ops.output_grad},
          {"gamma", ops.weight(0)},
          {"beta", ops.weight(1)},
          {"mean", mean},
          {"variance", variance},
          {"diff_src", ops.input_grad(0)},
          {"diff_gamma", ops.weight_grad(0)},
          {"diff_beta", ops.weight_grad(1)}};
}

Status lower_conv(LayerOps& ops) {
  const TensorShape &x = ops.x, &y = ops.y;
  ConvOp op;
  op.mb = x.n, op.ic = x.c, op.ih = x.h, op.iw = x.w, op.oc = y.c;
  op.kh = op.kw = ops.layer.kernel, op.sh = op.sw = ops.layer.stride;
  op.ph = op.pw = ops.layer.pad;
  op.dtype = ops.step.policy.matmul_dtype(ops.dtype), op.layout = ops.step.options.layout;
  op.winograd_allowed = ops.step.options.winograd_allowed;
  op.first_engine = ops.step.options.validation_only;
  TB_RETURN_IF_ERROR(
      ops.forward(op, {{"src", ops.input}, {"weights", ops.weight(0)}, {"dst", ops.output}}));
  if (ops.has_grad) {
    op.direction = ConvDirection::backward_data;
    TB_RETURN_IF_ERROR(ops.backward(op, {{"diff_dst", ops.output_grad},
                                         {"weights", ops.weight(0)},
                                         {"diff_src", ops.input_grad(0)}}));
  }
  op.direction = ConvDirection::backward_weights;
  return ops.backward(
      op,
      {{"src", ops.input}, {"diff_dst", ops.output_grad}, {"diff_weights", ops.weight_grad(0)}});
}

// Training: normalized by the batch's statistics, which backward reads again; evaluation:
// by the running ones.
Status lower_batch_norm(LayerOps& ops) {
  const TensorShape& x = ops.x;
  Impl& step = ops.step;
  BatchNormOp op;
  op.mb = x.n, op.channels = x.c, op.h = x.h, op.w = x.w;
  op.fuse_relu = ops.layer.relu, op.dtype = ops.dtype, op.layout = step.options.layout;
  const std::size_t channel_bytes = static_cast<std::size_t>(x.c) * dtype_size(step.channel_dtype);
  std::pair<int, int>& running = step.running[ops.l];
  running = {ops.new_slot(channel_bytes), ops.new_slot(channel_bytes)};
  if (step.options.evaluation) {
    op.inference = true;
    return ops.forward(op, {{"src", ops.input},
                            {"gamma", ops.weight(0)},
                            {"beta", ops.weight(1)},
                            {"running_mean", running.first},
                            {"running_var", running.second},
                            {"dst", ops.output}});
  }
  const int mean = ops.new_slot(), variance = ops.new_slot();
  NamedSlots forward_slots = normalization_forward(ops, mean, variance);
  forward_slots.insert(forward_slots.end(),
                       {{"running_mean", running.first}, {"running_var", running.second}});
  NamedSlots backward_slots = normalization_backward(ops, mean, variance);
  if (ops.layer.relu) {
    const int mask = ops.new_slot();
    forward_slots.push_back({"relu_mask", mask});
    backward_slots.push_back({"relu_mask", mask});
  }
  TB_RETURN_IF_ERROR(ops.forward(op, forward_slots));
  op.pass = Pass::backward;
  return ops.backward(op, backward_slots);
}

// Max pooling keeps the indices its backward routes by; global average pooling needs none.
Status lower_pool(LayerOps& ops) {
  const TensorShape& x = ops.x;
  const Layer& layer = ops.layer;
  PoolOp op;
  const bool max = layer.kind == LayerKind::max_pool;
  op.kind = max ? PoolKind::max : PoolKind::global_average;
  op.mb = x.n, op.channels = x.c, op.ih = x.h, op.iw = x.w;
  op.kh = max ? layer.kernel : x.h, op.kw = max ? layer.kernel : x.w;
  op.sh = op.sw = max ? layer.stride : 1, op.ph = op.pw = max ? layer.pad : 0;
  op.dtype = ops.dtype, op.layout = ops.step.options.layout;
  NamedSlots forward_slots = {{"src", ops.input}, {"dst", ops.output}},
             backward_slots = {{"diff_dst", ops.output_grad}, {"diff_src", ops.input_grad(0)}};
  if (max) {
    const int indices = ops.new_slot();
    forward_slots.push_back({"indices", indices});
    backward_slots.push_back({"indices", indices});
  }
  TB_RETURN_IF_ERROR(ops.forward(op, forward_slots));
  op.pass = Pass::backward;
  return ops.backward(op, backward_slots);
}

Status lower_fully_connected(LayerOps& ops) {
  const TensorShape &x = ops.x, &y = ops.y;
  FullyConnectedOp op;
  op.mb = x.n, op.in = x.c * x.h * x.w, op.out = y.c;
  op.dtype = ops.step.policy.matmul_dtype(ops.dtype);
  TB_RETURN_IF_ERROR(ops.forward(op, {{"src", ops.input},
                                      {"weights", ops.weight(0)},
                                      {"bias", ops.weight(1)},
                                      {"dst", ops.output}}));
  op.direction = ConvDirection::backward_data;
  TB_RETURN_IF_ERROR(ops.backward(op, {{"diff_dst", ops.output_grad},
                                       {"weights", ops.weight(0)},
                                       {"diff_src", ops.input_grad(0)}}));
  op.direction = ConvDirection::backward_weights;
  return ops.backward(op, {{"src", ops.input},
                           {"diff_dst", ops.output_grad},
                           {"diff_weights", ops.weight_grad(0)},
                           {"diff_bias", ops.weight_grad(1)}});
}

// relu(a + b); backward is the ReLU's, into the one gradient both inputs share (join_diff).
Status lower_add_relu(LayerOps& ops) {
  BinaryOp add;
  add.count = ops.y.elements(), add.fuse_relu = true, add.dtype = ops.dtype;
  TB_RETURN_IF_ERROR(
      ops.forward(add, {{"src0", ops.input}, {"src1", ops.input_value(1)}, {"dst", ops.output}}));
  EltwiseOp relu;
  relu.pass = Pass::backward, relu.count = ops.y.elements(), relu.dtype = ops.dtype;
  return ops.backward(relu, {{"dst", ops.output},
                             {"diff_dst", ops.output_grad},
                             {"diff_src", ops.routing.join_diff.at(ops.l)}});
}

// Backward: both inputs' gradients are the output's (join_diff aliases it), so no op.
Status lower_add(LayerOps& ops) {
  BinaryOp add;
  add.count = ops.y.elements(), add.dtype = ops.dtype;
  return ops.forward(add, {{"src0", ops.input}, {"src1", ops.input_value(1)}, {"dst", ops.output}});
}

// A loss: its output is one of the values loss() sums; backward starts from it (scaled by
// the loss scale where the step scales).
Status lower_softmax_cross_entropy(LayerOps& ops) {
  const TensorShape& x = ops.x;
  SoftmaxCrossEntropyOp op;
  op.rows = x.n, op.classes = x.c * x.h * x.w, op.dtype = ops.dtype;
  const int labels = ops.input_value(1), probabilities = ops.new_slot();
  ops.step.loss_slots.push_back(ops.output);
  TB_RETURN_IF_ERROR(ops.forward(op, {{"logits", ops.input},
                                      {"labels", labels},
                                      {"probabilities", probabilities},
                                      {"loss", ops.output}}));
  op.pass = Pass::backward, op.scaled = ops.step.loss_scale_slot >= 0;
  NamedSlots backward_slots = {
      {"probabilities", probabilities}, {"labels", labels}, {"diff_logits", ops.input_grad(0)}};
  if (op.scaled) backward_slots.push_back({"scale", ops.step.loss_scale_slot});
  return ops.backward(op, backward_slots);
}

// A table lookup by index input; a table tied to a later layer adds its gradient to that
// layer's (which runs backward first).
Status lower_embedding(LayerOps& ops) {
  const int table_parameter = ops.layer.params.at(0);
  const Parameter& table = ops.step.network.parameters()[table_parameter];
  EmbeddingOp op;
  op.tokens = ops.x.elements(), op.vocab = table.dims.at(0), op.dim = table.dims.at(1);
  op.dtype = ops.dtype;
  const int ids = ops.input_value(0);
  TB_RETURN_IF_ERROR(
      ops.forward(op, {{"table", ops.weight(0)}, {"ids", ids}, {"dst", ops.output}}));
  op.pass = Pass::backward, op.accumulate = ops.routing.last_user[table_parameter] != ops.l;
  return ops.backward(
      op, {{"diff_dst", ops.output_grad}, {"ids", ids}, {"diff_table", ops.weight_grad(0)}});
}

Status lower_gather_rows(LayerOps& ops) {
  EmbeddingOp op;
  op.tokens = ops.step.network.tensors()[ops.layer.inputs.at(1)].elements();
  op.vocab = ops.x.n, op.dim = ops.x.c, op.dtype = ops.dtype, op.weight_table = false;
  const int ids = ops.input_value(1);
  TB_RETURN_IF_ERROR(ops.forward(op, {{"table", ops.input}, {"ids", ids}, {"dst", ops.output}}));
  op.pass = Pass::backward;
  return ops.backward(
      op, {{"diff_dst", ops.output_grad}, {"ids", ids}, {"diff_table", ops.input_grad(0)}});
}

Status lower_layer_norm(LayerOps& ops) {
  LayerNormOp op;
  op.rows = ops.x.n, op.cols = ops.x.c, op.dtype = ops.dtype;
  const int mean = ops.new_slot(), variance = ops.new_slot();
  TB_RETURN_IF_ERROR(ops.forward(op, normalization_forward(ops, mean, variance)));
  op.pass = Pass::backward;
  return ops.backward(op, normalization_backward(ops, mean, variance));
}

Status lower_rms_norm(LayerOps& ops) {
  RmsNormOp op;
  op.rows = ops.x.n, op.cols = ops.x.c, op.dtype = ops.dtype;
  const int inverse_rms = ops.new_slot();
  TB_RETURN_IF_ERROR(ops.forward(op, {{"src", ops.input},
                                      {"gamma", ops.weight(0)},
                                      {"dst", ops.output},
                                      {"inverse_rms", inverse_rms}}));
  op.pass = Pass::backward;
  return ops.backward(op, {{"src", ops.input},
                           {"diff_dst", ops.output_grad},
                           {"gamma", ops.weight(0)},
                           {"inverse_rms", inverse_rms},
                           {"diff_src", ops.input_grad(0)},
                           {"diff_gamma", ops.weight_grad(0)}});
}

Status lower_gelu_or_tanh(LayerOps& ops) {
  EltwiseOp op;
  op.kind = ops.layer.kind == LayerKind::gelu ? EltwiseKind::gelu : EltwiseKind::tanh;
  op.count = ops.y.elements(), op.dtype = ops.dtype;
  TB_RETURN_IF_ERROR(ops.forward(op, {{"src", ops.input}, {"dst", ops.output}}));
  op.pass = Pass::backward;  // GELU's gradient from its input, tanh's from its output
  const bool gelu = op.kind == EltwiseKind::gelu;
  return ops.backward(op, {{gelu ? "src" : "dst", gelu ? ops.input : ops.output},
                           {"diff_dst", ops.output_grad},
                           {"diff_src", ops.input_grad(0)}});
}

// The mask is drawn from the layer's seed and the step number (in host memory), never stored.
Status lower_dropout(LayerOps& ops) {
  Impl& step = ops.step;
  if (step.options.evaluation) {  // the identity: its output is its input
    step.memory[ops.output].alias = ops.input;
    return Status::Ok();
  }
  DropoutOp op;
  op.count = ops.y.elements(), op.probability = ops.layer.probability, op.dtype = ops.dtype;
  op.seed = mix64(step.options.dropout_seed + static_cast<std::uint64_t>(ops.l) * kGoldenGamma);
  if (step.dropout_step_slot < 0)
    step.dropout_step_slot = step.memory.host_slot(sizeof(std::int32_t));
  TB_RETURN_IF_ERROR(
      ops.forward(op, {{"src", ops.input}, {"step", step.dropout_step_slot}, {"dst", ops.output}}));
  op.pass = Pass::backward;
  return ops.backward(op, {{"diff_dst", ops.output_grad},
                           {"step", step.dropout_step_slot},
                           {"diff_src", ops.input_grad(0)}});
}

// scores[b, h] = Q[b, h] K[b, h]^T, with Q and K head-interleaved as the projections store
// them; backward dQ = dS K, dK = dS^T Q.
Status lower_attention_scores(LayerOps& ops) {
  const std::int64_t sequence = ops.layer.sequence, heads = ops.layer.heads;
  GemmOp op;
  op.batch = ops.x.n / sequence, op.heads = heads;
  op.a_type = op.b_type = ops.step.policy.matmul_dtype(ops.dtype), op.c_type = ops.dtype;
  op.m = sequence, op.n = sequence, op.k = ops.x.c / heads, op.trans_b = true;
  op.a_interleaved = op.b_interleaved = true;
  const int queries = ops.input_value(0), keys = ops.input_value(1);
  TB_RETURN_IF_ERROR(ops.forward(op, {{"a", queries}, {"b", keys}, {"c", ops.output}}));
  GemmOp dq = op;
  dq.n = op.k, dq.k = sequence, dq.trans_b = false, dq.a_interleaved = false,
  dq.c_interleaved = true;
  TB_RETURN_IF_ERROR(
      ops.backward(dq, {{"a", ops.output_grad}, {"b", keys}, {"c", ops.input_grad(0)}}));
  GemmOp dk = dq;
  dk.trans_a = true;
  return ops.backward(dk, {{"a", ops.output_grad}, {"b", queries}, {"c", ops.input_grad(1)}});
}

// context[b, h] = P[b, h] V[b, h], with V and the context head-interleaved; backward
// dP = dC V^T, dV = P^T dC.
Status lower_attention_context(LayerOps& ops) {
  const std::int64_t sequence = ops.layer.sequence, heads = ops.layer.heads;
  const std::int64_t head_dim = ops.step.network.tensors()[ops.layer.inputs.at(1)].c / heads;
  GemmOp op;
  op.batch = ops.x.n / (heads * sequence), op.heads = heads;
  op.a_type = op.b_type = ops.step.policy.matmul_dtype(ops.dtype), op.c_type = ops.dtype;
  op.m = sequence, op.n = head_dim, op.k = sequence;
  op.b_interleaved = op.c_interleaved = true;
  const int probabilities = ops.input_value(0), values = ops.input_value(1);
  TB_RETURN_IF_ERROR(ops.forward(op, {{"a", probabilities}, {"b", values}, {"c", ops.output}}));
  GemmOp dp = op;
  dp.n = sequence, dp.k = head_dim, dp.trans_b = true;
  dp.a_interleaved = true, dp.b_interleaved = true, dp.c_interleaved = false;
  TB_RETURN_IF_ERROR(
      ops.backward(dp, {{"a", ops.output_grad}, {"b", values}, {"c", ops.input_grad(0)}}));
  GemmOp dv = op;
  dv.trans_a = true;
  return ops.backward(dv, {{"a", probabilities}, {"b", ops.output_grad}, {"c", ops.input_grad(1)}});
}

// Fused: queries, keys, values (head-interleaved), key lengths; the softmax statistics are
// kept for backward.
Status lower_attention(LayerOps& ops) {
  const Layer& layer = ops.layer;
  AttentionOp op;
  op.sequence = layer.sequence, op.heads = layer.heads, op.batch = ops.x.n / layer.sequence;
  op.head_dim = ops.x.c / layer.heads, op.scale = layer.scale, op.dtype = ops.dtype;
  const int keys = ops.input_value(1), values = ops.input_value(2), lengths = ops.input_value(3),
            stats = ops.new_slot();
  NamedSlots slots = {{"q", ops.input},         {"k", keys},         {"v", values},
                      {"key_lengths", lengths}, {"out", ops.output}, {"stats", stats}};
  TB_RETURN_IF_ERROR(ops.forward(op, slots));
  op.pass = Pass::backward;
  slots.insert(slots.end(), {{"diff_out", ops.output_grad},
                             {"diff_q", ops.input_grad(0)},
                             {"diff_k", ops.input_grad(1)},
                             {"diff_v", ops.input_grad(2)}});
  return ops.backward(op, slots);
}

Status lower_attention_softmax(LayerOps& ops) {
  SoftmaxOp op;
  op.rows = ops.x.n, op.cols = ops.x.c, op.masked = true, op.dtype = ops.dtype;
  op.rows_per_mask = ops.layer.heads * ops.layer.sequence;
  op.scale = ops.layer.scale;
  TB_RETURN_IF_ERROR(
      ops.forward(op, {{"src", ops.input}, {"mask", ops.input_value(1)}, {"dst", ops.output}}));
  op.pass = Pass::backward;
  return ops.backward(
      op, {{"dst", ops.output}, {"diff_dst", ops.output_grad}, {"diff_src", ops.input_grad(0)}});
}

using Lowering = Status (*)(LayerOps&);

// The lowering of each layer kind: a table written as a switch, so that the compiler names a
// kind left out (-Wswitch).
Lowering lowering_of(LayerKind kind) {
  switch (kind) {
    case LayerKind::conv:
      return lower_conv;
    case LayerKind::batch_norm:
      return lower_batch_norm;
    case LayerKind::max_pool:
    case LayerKind::global_avg_pool:
      return lower_pool;
    case LayerKind::fully_connected:
    case LayerKind::linear:
      return lower_fully_connected;
    case LayerKind::add_relu:
      return lower_add_relu;
    case LayerKind::add:
      return lower_add;
    case LayerKind::softmax_cross_entropy:
      return lower_softmax_cross_entropy;
    case LayerKind::embedding:
      return lower_embedding;
    case LayerKind::gather_rows:
      return lower_gather_rows;
    case LayerKind::layer_norm:
      return lower_layer_norm;
    case LayerKind::rms_norm:
      return lower_rms_norm;
    case LayerKind::gelu:
    case LayerKind::tanh:
      return lower_gelu_or_tanh;
    case LayerKind::dropout:
      return lower_dropout;
    case LayerKind::attention_scores:
      return lower_attention_scores;
    case LayerKind::attention_context:
      return lower_attention_context;
    case LayerKind::attention:
      return lower_attention;
    case LayerKind::attention_softmax:
      return lower_attention_softmax;
  }
  return nullptr;
}

// Layer `l`'s ops. A layer whose dtype differs from its first input's reads a converted copy,
// and that input's gradient is converted back (the classifier under mixed precision). A second
// data input must already share the layer's dtype.
Status lower_layer(Impl& step, const Routing& routing, int l) {
  const Layer& layer = step.network.layers()[l];
  const int in = layer.inputs.at(0), out = layer.output;
  const DType dtype = step.policy.layer_dtype(layer.kind);
  for (int p : layer.params)
    if (routing.last_user[p] != l && layer.kind != LayerKind::embedding)
      return Status::Failed(
          fmt::format("{}: a parameter shared with a later layer must be read by an embedding here "
                      "(only its backward adds to a gradient)",
                      layer.name));
  const std::vector<DType>& tensor_dtype = routing.tensor_dtype;
  const bool cast_input = tensor_dtype[in] != dtype && tensor_dtype[in] != DType::i32;
  const bool joins = layer.kind == LayerKind::add_relu || layer.kind == LayerKind::add ||
                     layer.kind == LayerKind::attention_scores ||
                     layer.kind == LayerKind::attention_context;
  const std::size_t data_inputs = layer.kind == LayerKind::attention ? 3 : joins ? 2 : 1;
  for (std::size_t i = 1; i < data_inputs; ++i)
    if (tensor_dtype[layer.inputs.at(i)] != dtype || cast_input)
      return Status::Failed(
          fmt::format("{}: a layer with several inputs must share their dtype", layer.name));
  const TensorShape& x = step.network.tensors()[in];
  LayerOps ops{step,
               routing,
               l,
               layer,
               x,
               step.network.tensors()[out],
               dtype,
               step.network.find_input(in) == nullptr,
               step.value[in],
               step.value[out],
               step.grad[out]};
  if (cast_input) {
    CastOp cast;
    cast.count = x.elements(), cast.from = tensor_dtype[in], cast.to = dtype;
    ops.input = ops.new_slot();
    TB_RETURN_IF_ERROR(ops.forward(cast, {{"src", step.value[in]}, {"dst", ops.input}}));
    ops.cast_diff = ops.new_slot();
  }
  const Lowering lower = lowering_of(layer.kind);
  if (!lower) return Status::Failed(fmt::format("{}: no lowering for its layer kind", layer.name));
  TB_RETURN_IF_ERROR(lower(ops));
  if (!cast_input || !ops.has_grad) return Status::Ok();
  CastOp back;
  back.count = x.elements(), back.from = dtype, back.to = tensor_dtype[in];
  return ops.backward(back, {{"src", ops.cast_diff}, {"dst", routing.target.at({l, 0})}});
}

// Parameters: one flat buffer each for values, gradients and the optimizer's state; under
// mixed precision a compute copy of the values, cast before each step.
Status plan_parameters(Impl& step) {
  for (const Parameter& parameter : step.network.parameters()) {
    step.parameter_offsets.push_back(step.param_total);
    step.param_total +=
        (parameter.elements() + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
  }
  const std::size_t flat_bytes =
      static_cast<std::size_t>(step.param_total) * dtype_size(step.policy.master);
  step.params_slot = step.memory.new_slot(flat_bytes);
  step.grads_slot = step.memory.new_slot(flat_bytes);
  // The loss gradient's scale: the dynamic loss scale, divided by the data-parallel ranks.
  if (step.scaler || (step.options.data_parallel_ranks > 1 && !step.options.evaluation))
    step.loss_scale_slot = step.memory.host_slot(sizeof(float));
  if (!step.policy.mixed()) return Status::Ok();
  step.compute_params_slot = step.memory.new_slot();
  CastOp cast;
  cast.count = step.param_total, cast.from = step.policy.master, cast.to = step.policy.compute;
  return step.add_op(step.weight_cast, cast,
                     {{"src", step.params_slot}, {"dst", step.compute_params_slot}}, 0,
                     Phase::weight_cast);
}

std::vector<DType> tensor_dtypes(const Impl& step) {
  std::vector<DType> tensor_dtype(step.network.tensors().size(), step.policy.compute);
  for (const NetworkInput& input : step.network.inputs())
    if (input.indices) tensor_dtype[input.tensor] = DType::i32;
  for (const Layer& layer : step.network.layers()) {
    tensor_dtype[layer.output] = step.policy.layer_dtype(layer.kind);
    if (layer.kind == LayerKind::attention_softmax)
      tensor_dtype[layer.inputs.at(1)] = step.channel_dtype;
  }
  return tensor_dtype;
}

// Every tensor's value slot, and who reads each tensor and where each reader's gradient for it
// goes. A residual join's backward produces one gradient for both inputs (add + ReLU: its ReLU
// backward; add: its output's gradient itself): its readers' targets are that buffer. A
// tensor with one reader has that reader's target as its gradient; one with several sums
// the readers' targets.
Status route_tensors(Impl& step, Routing* routing) {
  const std::vector<TensorShape>& tensors = step.network.tensors();
  const std::vector<Layer>& layers = step.network.layers();
  StepMemory& memory = step.memory;
  auto is_input = [&](int t) { return step.network.find_input(t) != nullptr; };
  routing->tensor_dtype = tensor_dtypes(step);
  auto& consumers = routing->consumers;
  consumers.assign(tensors.size(), {});
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (std::size_t i = 0; i < layers[l].inputs.size(); ++i)
      consumers[layers[l].inputs[i]].push_back({static_cast<int>(l), static_cast<int>(i)});
  step.value.assign(tensors.size(), -1);
  step.grad.assign(tensors.size(), -1);
  for (std::size_t t = 0; t < tensors.size(); ++t) step.value[t] = memory.new_slot();
  std::vector<int>& join_diff = routing->join_diff;
  join_diff.assign(layers.size(), -1);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerKind kind = layers[l].kind;
    if (kind == LayerKind::add_relu || kind == LayerKind::add) join_diff[l] = memory.new_slot();
    for (std::size_t i = 0; i < layers[l].inputs.size(); ++i) {
      const int t = layers[l].inputs[i];
      if (is_input(t)) continue;
      const std::pair<int, int> reader = {static_cast<int>(l), static_cast<int>(i)};
      if (join_diff[l] >= 0)
        routing->target[reader] =
            consumers[t].size() == 1 ? join_diff[l] : memory.alias_slot(join_diff[l]);
      else
        routing->target[reader] = memory.new_slot();
    }
  }
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    if (consumers[t].empty() || is_input(static_cast<int>(t))) continue;
    step.grad[t] = consumers[t].size() == 1 ? routing->target[consumers[t][0]] : memory.new_slot();
  }
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].kind != LayerKind::add) continue;
    if (step.grad[layers[l].output] < 0)
      return Status::Failed(
          fmt::format("{}: the residual add's output is never read", layers[l].name));
    memory[join_diff[l]].alias = step.grad[layers[l].output];
  }
  routing->last_user.assign(step.network.parameters().size(), -1);
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (int p : layers[l].params) routing->last_user[p] = static_cast<int>(l);
  return Status::Ok();
}

// Backward runs in reverse layer order; a layer's ops keep their order. Before a layer's
// backward, the gradients its output received from several readers are summed.
Status order_backward(Impl& step, const Routing& routing) {
  const std::vector<TensorShape>& tensors = step.network.tensors();
  const std::vector<Layer>& layers = step.network.layers();
  std::vector<Impl::Op> ordered;
  std::vector<std::vector<Impl::Op>> by_layer(layers.size());
  for (Impl::Op& op : step.backward) by_layer[op.layer].push_back(std::move(op));
  step.backward.clear();
  for (int l = static_cast<int>(layers.size()) - 1; l >= 0; --l) {
    const int out = layers[l].output;
    const std::vector<std::pair<int, int>>& readers = routing.consumers[out];
    if (readers.size() > 1) {
      BinaryOp sum;
      sum.count = tensors[out].elements(), sum.dtype = routing.tensor_dtype[out];
      int accumulated = routing.target.at(readers[0]);
      for (std::size_t k = 1; k < readers.size(); ++k) {
        TB_RETURN_IF_ERROR(step.add_op(ordered, sum,
                                       {{"src0", accumulated},
                                        {"src1", routing.target.at(readers[k])},
                                        {"dst", step.grad[out]}},
                                       l, Phase::backward));
        accumulated = step.grad[out];
      }
    }
    for (Impl::Op& op : by_layer[l]) ordered.push_back(std::move(op));
  }
  step.backward = std::move(ordered);
  return Status::Ok();
}

// Each input enters through the first forward op that reads it, in that op's layout.
Status bind_inputs(Impl& step) {
  for (const NetworkInput& input : step.network.inputs()) {
    Impl::InputBinding binding;
    for (std::size_t o = 0; o < step.forward.size() && binding.op < 0; ++o)
      for (std::size_t i = 0; i < step.forward[o].slots.size(); ++i)
        if (step.forward[o].slots[i] == step.value[input.tensor]) {
          binding = {static_cast<int>(o), static_cast<int>(i)};
          break;
        }
    if (binding.op < 0)
      return Status::Failed(fmt::format("no layer reads the network's input '{}'", input.name));
    step.input_bindings.push_back(binding);
  }
  return Status::Ok();
}

// Loss scaling unscales and checks the gradients before any update; then one optimizer op
// updates every parameter in the flat buffers.
Status add_optimizer(Impl& step) {
  StepMemory& memory = step.memory;
  if (step.scaler) {
    UnscaleGradientsOp check;
    check.count = step.param_total, check.dtype = step.policy.master;
    step.inverse_scale_slot = memory.host_slot(sizeof(float));
    step.nonfinite_slot = memory.new_slot(sizeof(std::int32_t));
    std::vector<Impl::Op> list;
    TB_RETURN_IF_ERROR(step.add_op(list, check,
                                   {{"grads", step.grads_slot},
                                    {"inverse_scale", step.inverse_scale_slot},
                                    {"found_nonfinite", step.nonfinite_slot}},
                                   0, Phase::optimizer));
    step.unscale = std::move(list.front());
  }
  OptimizerOp op;
  op.kind = step.options.optimizer, op.count = step.param_total, op.dtype = step.policy.master;
  op.tensors = static_cast<std::int64_t>(step.parameter_offsets.size());
  const std::size_t flat_bytes =
      static_cast<std::size_t>(step.param_total) * dtype_size(step.policy.master);
  const int moments = op.kind == OptimizerKind::sgd_momentum ? 1 : 2;
  for (int k = 0; k < moments; ++k)
    step.optimizer_state_slots.push_back(memory.new_slot(flat_bytes));
  step.hyper_slot = memory.host_slot(
      (op.kind == OptimizerKind::sgd_momentum ? kSgdHyperCount : kAdamHyperCount) * sizeof(float));
  NamedSlots operands = {
      {"weights", step.params_slot}, {"grads", step.grads_slot}, {"hyper", step.hyper_slot}};
  const std::vector<int>& state = step.optimizer_state_slots;
  if (op.kind == OptimizerKind::sgd_momentum)
    operands.push_back({"momentum", state.front()});
  else
    operands.insert(operands.end(), {{"m", state.front()}, {"v", state.back()}});
  if (op.kind == OptimizerKind::lamb) {
    step.tensor_offsets_slot =
        memory.new_slot((step.parameter_offsets.size() + 1) * sizeof(std::int32_t));
    operands.push_back({"tensor_offsets", step.tensor_offsets_slot});
  }
  std::vector<Impl::Op> list;
  TB_RETURN_IF_ERROR(step.add_op(list, op, operands, 0, Phase::optimizer));
  step.optimizer = std::move(list.front());
  return Status::Ok();
}

// The slots in the order `specs` declares the operands; a name the op does not declare, one
// given twice or an operand left without a slot is a lowering error.
Status order_slots(const std::vector<OperandSpec>& specs, const NamedSlots& named,
                   std::vector<int>* slots) {
  slots->assign(specs.size(), -1);
  for (const auto& [name, slot] : named) {
    const std::optional<int> index = find_operand(specs, name);
    if (!index) return Status::Failed(fmt::format("the plan has no operand '{}'", name));
    if ((*slots)[*index] >= 0)
      return Status::Failed(fmt::format("operand '{}' is given twice", name));
    (*slots)[*index] = slot;
  }
  for (std::size_t i = 0; i < specs.size(); ++i)
    if ((*slots)[i] < 0)
      return Status::Failed(fmt::format("the step gives operand '{}' no slot", specs[i].name));
  return Status::Ok();
}

}  // namespace

Status TrainingStep::Impl::build() {
  TB_RETURN_IF_ERROR(plan_parameters(*this));
  Routing routing;
  TB_RETURN_IF_ERROR(route_tensors(*this, &routing));
  running.assign(network.layers().size(), {-1, -1});
  for (std::size_t l = 0; l < network.layers().size(); ++l)
    TB_RETURN_IF_ERROR(lower_layer(*this, routing, static_cast<int>(l)));
  TB_RETURN_IF_ERROR(order_backward(*this, routing));
  TB_RETURN_IF_ERROR(bind_inputs(*this));
  if (loss_slots.empty()) return Status::Failed("the network has no loss layer");
  return options.evaluation ? Status::Ok() : add_optimizer(*this);
}

Status TrainingStep::Impl::add_op(std::vector<Op>& list, const OpDesc& desc,
                                  const NamedSlots& named, int layer, Phase phase) {
  std::unique_ptr<Plan> plan;
  const Status status = backend.plan(desc, &plan);
  const std::string& where = network.layers()[layer].name;
  if (!status.ok()) return status.with_prefix(fmt::format("{} ({}): ", where, op_name(desc)));
  std::vector<int> operand_slots;
  TB_RETURN_IF_ERROR(order_slots(plan->operands(), named, &operand_slots)
                         .with_prefix(fmt::format("{} ({}): ", where, op_name(desc))));
  for (std::size_t i = 0; i < operand_slots.size(); ++i) {
    StepMemory::Slot& slot = memory[memory.root(operand_slots[i])];
    const OperandSpec& spec = plan->operands()[i];
    if (slot.base >= 0 &&
        (slot.bytes < spec.bytes || storage_dtype(spec.dtype) != slot_dtype_of_base(slot.base)))
      return Status::Failed(
          fmt::format("{}: {} operand {} needs {} bytes of {}, the parameter has {} bytes of {}",
                      where, op_name(desc), spec.name, spec.bytes, dtype_name(spec.dtype),
                      slot.bytes, dtype_name(slot_dtype_of_base(slot.base))));
    slot.bytes = std::max(slot.bytes, spec.bytes);
  }
  workspace_bytes = std::max(workspace_bytes, plan->workspace_bytes());
  list.push_back({desc, std::move(plan), std::move(operand_slots), layer, phase});
  return Status::Ok();
}

int TrainingStep::Impl::param_slot(int base, int param, DType type) {
  const std::size_t size = dtype_size(type);
  return memory.view_slot(base, static_cast<std::size_t>(parameter_offsets[param]) * size,
                          static_cast<std::size_t>(network.parameters()[param].elements()) * size);
}

}  // namespace tb
