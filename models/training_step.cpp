#include "models/training_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <optional>

#include <fmt/format.h>

#include "models/precision.h"

#include "backends/cpu/low_precision.h"
#include "workloads/workload.h"

namespace tb {
namespace {

constexpr std::size_t kLargeAlignment = 4096, kSmallAlignment = 64;
constexpr std::int64_t kParamAlignment = 16;  // elements: every parameter starts on 64 bytes

std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

enum class Phase { weight_cast, forward, backward, optimizer };

// Seeded standard normal values (Box-Muller on splitmix64 counters).
double normal(std::uint64_t seed, std::uint64_t index) {
  const double scale = 1.0 / 9007199254740992.0;  // 2^-53
  const double u1 = (static_cast<double>(mix64(seed + 2 * index * kGoldenGamma) >> 11) + 1) * scale;
  const double u2 = static_cast<double>(mix64(seed + (2 * index + 1) * kGoldenGamma) >> 11) * scale;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

double uniform(std::uint64_t seed, std::uint64_t index) {  // in [-1, 1)
  return static_cast<double>(mix64(seed + index * kGoldenGamma) >> 11) / 4503599627370496.0 - 1.0;
}

std::vector<char> to_bytes(const std::vector<double>& values, DType dtype) {
  std::vector<char> bytes(values.size() * dtype_size(dtype));
  if (dtype == DType::f64) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else if (dtype == DType::i32) {
    std::vector<std::int32_t> integers(values.begin(), values.end());
    std::memcpy(bytes.data(), integers.data(), bytes.size());
  } else if (dtype == DType::bf16) {
    std::vector<std::uint16_t> narrow(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      narrow[i] = cpu::float_to_bf16(static_cast<float>(values[i]));
    std::memcpy(bytes.data(), narrow.data(), bytes.size());
  } else {
    std::vector<float> narrow(values.begin(), values.end());
    std::memcpy(bytes.data(), narrow.data(), bytes.size());
  }
  return bytes;
}

std::vector<double> from_bytes(const char* bytes, std::size_t count, DType dtype) {
  std::vector<double> values(count);
  if (dtype == DType::f64) {
    std::memcpy(values.data(), bytes, count * sizeof(double));
  } else if (dtype == DType::bf16) {
    std::vector<std::uint16_t> narrow(count);
    std::memcpy(narrow.data(), bytes, count * sizeof(std::uint16_t));
    for (std::size_t i = 0; i < count; ++i) values[i] = cpu::bf16_to_float(narrow[i]);
  } else if (dtype == DType::i32) {
    std::vector<std::int32_t> integers(count);
    std::memcpy(integers.data(), bytes, count * sizeof(std::int32_t));
    std::copy(integers.begin(), integers.end(), values.begin());
  } else {
    std::vector<float> narrow(count);
    std::memcpy(narrow.data(), bytes, count * sizeof(float));
    std::copy(narrow.begin(), narrow.end(), values.begin());
  }
  return values;
}

// The same op in f64 on plain layouts: what the shared CPU code computes as the reference.
// Casts and the optimizer have no reference here (the cast is exact one way, the optimizer
// is checked by its own tests).
std::optional<OpDesc> reference_op(const OpDesc& desc) {
  return std::visit(
      [](auto op) -> std::optional<OpDesc> {
        if constexpr (std::is_same_v<decltype(op), CastOp> ||
                      std::is_same_v<decltype(op), OptimizerOp>) {
          return std::nullopt;
        } else {
          if constexpr (requires { op.dtype; }) op.dtype = DType::f64;
          if constexpr (requires { op.layout; }) op.layout = Layout::plain;
          if constexpr (requires { op.winograd_allowed; }) op.winograd_allowed = false;
          return OpDesc(op);
        }
      },
      desc);
}

// Operands whose contents differ by design between implementations (oneDNN's workspace
// formats) or that are updated in place (running statistics): never compared.
bool opaque_operand(const std::string& name) {
  return name == "relu_mask" || name == "indices";
}
bool in_place_operand(const std::string& name) {
  return name == "running_mean" || name == "running_var";
}

double op_tolerance(DType output) {
  switch (output) {
    case DType::bf16:
      return 2e-2;  // one bf16 rounding of the output (2^-9) with room for accumulation order
    case DType::f64:
      return 1e-9;
    default:
      return 1e-4;  // fp32 accumulation over long reductions, Winograd transforms included
  }
}

}  // namespace

struct TrainingStep::Impl {
  // A region of the arena, an alias of another slot, or a view into another slot.
  struct Slot {
    std::size_t bytes = 0;
    int alias = -1;               // same memory as that slot
    int base = -1;                // a view into that slot ...
    std::size_t base_offset = 0;  // ... at this byte offset
    std::size_t offset = 0;       // in the arena, for owned slots
    Buffer buffer = {};
  };
  struct Op {
    OpDesc desc;
    std::unique_ptr<Plan> plan;
    std::vector<int> slots;
    int layer;
    Phase phase;
    std::vector<Buffer> buffers = {};  // the slots' memory, resolved once after allocation
  };
  struct ParamView {
    std::int64_t offset = 0;  // elements into the flat parameter buffer
  };

  Backend& backend;
  const Network network;
  PrecisionPolicy policy;
  DType channel_dtype;  // batch-norm statistics, scale and shift
  Layout layout;
  bool winograd_allowed;
  std::vector<Slot> slots;
  std::vector<Op> weight_cast, forward, backward;  // weight_cast: the compute copy (mixed)
  Op optimizer;
  std::vector<ParamView> params;
  std::int64_t param_total = 0;  // elements, padding included
  int params_slot = -1, grads_slot = -1, momentum_slot = -1, labels_slot = -1, loss_slot = -1;
  int compute_params_slot = -1;  // the parameters in the compute dtype (mixed precision)
  std::vector<int> value, grad;  // per tensor
  std::vector<std::pair<int, int>> running;  // per layer: running mean / var slots (-1: none)
  Buffer arena, workspace, hyper;
  std::size_t workspace_bytes = 0;
  int input_consumer_op = -1;  // forward op whose operand 0 is the input batch

  Impl(Backend& b, const Network& n, const StepOptions& options)
      : backend(b),
        network(n),
        policy(PrecisionPolicy::for_compute(options.dtype)),
        channel_dtype(options.dtype == DType::f64 ? options.dtype : DType::f32),
        layout(options.layout),
        winograd_allowed(options.winograd_allowed) {}

  ~Impl() {
    for (Buffer buffer : {arena, workspace, hyper})
      if (buffer.data) backend.release(buffer);
  }

  int new_slot(std::size_t bytes = 0) {
    slots.push_back({bytes});
    return static_cast<int>(slots.size()) - 1;
  }
  int alias_slot(int of) {
    Slot slot;
    slot.alias = of;
    slots.push_back(slot);
    return static_cast<int>(slots.size()) - 1;
  }
  int view_slot(int base, std::size_t offset, std::size_t bytes) {
    Slot slot;
    slot.base = base;
    slot.base_offset = offset;
    slot.bytes = bytes;
    slots.push_back(slot);
    return static_cast<int>(slots.size()) - 1;
  }
  int root(int slot) const {
    while (slots[slot].alias >= 0) slot = slots[slot].alias;
    return slot;
  }
  int param_slot(int base, int param, DType type) {
    const std::size_t size = dtype_size(type);
    return view_slot(base, static_cast<std::size_t>(params[param].offset) * size,
                     static_cast<std::size_t>(network.parameters()[param].elements()) * size);
  }

  Status add_op(std::vector<Op>& list, const OpDesc& desc, std::vector<int> operand_slots,
                int layer, Phase phase) {
    std::unique_ptr<Plan> plan;
    const Status status = backend.plan(desc, &plan);
    if (!status.ok())
      return Status(status.code(), fmt::format("{} ({}): {}", network.layers()[layer].name,
                                               op_name(desc), status.message()));
    if (plan->operands().size() != operand_slots.size())
      return Status::Failed(fmt::format("{}: the {} plan takes {} operands, the step gives {}",
                                        network.layers()[layer].name, op_name(desc),
                                        plan->operands().size(), operand_slots.size()));
    for (std::size_t i = 0; i < operand_slots.size(); ++i) {
      Slot& slot = slots[root(operand_slots[i])];
      if (slot.base >= 0 && slot.bytes < plan->operands()[i].bytes)
        return Status::Failed(fmt::format("{}: operand {} needs {} bytes, the parameter has {}",
                                          network.layers()[layer].name, plan->operands()[i].name,
                                          plan->operands()[i].bytes, slot.bytes));
      slot.bytes = std::max(slot.bytes, plan->operands()[i].bytes);
    }
    workspace_bytes = std::max(workspace_bytes, plan->workspace_bytes());
    list.push_back({desc, std::move(plan), std::move(operand_slots), layer, phase});
    return Status::Ok();
  }

  // The framework's state dict, in its order: each parameter, and after a batch norm's
  // parameters its running statistics and batch counter.
  struct StateEntry {
    std::string name;
    std::vector<std::int64_t> dims;
    int parameter = -1;     // a parameter id, or
    int running_slot = -1;  // a running-statistics slot, or neither: num_batches_tracked
  };
  std::vector<StateEntry> state_entries() const {
    std::vector<StateEntry> entries;
    for (std::size_t l = 0; l < network.layers().size(); ++l) {
      const Layer& layer = network.layers()[l];
      for (int p : layer.params)
        entries.push_back({network.parameters()[p].name, network.parameters()[p].dims, p});
      if (running[l].first < 0) continue;
      const std::int64_t channels = network.tensors()[layer.inputs[0]].c;
      entries.push_back({layer.name + ".running_mean", {channels}, -1, running[l].first});
      entries.push_back({layer.name + ".running_var", {channels}, -1, running[l].second});
      entries.push_back({layer.name + ".num_batches_tracked", {}});
    }
    return entries;
  }
  Status download_slot(int slot, std::vector<char>* out) const {
    out->resize(slots[slot].bytes);
    return backend.download(slots[slot].buffer, out->data(), out->size());
  }
  // Parameter `p` out of a flat buffer (values or gradients) in the master dtype.
  NamedTensor parameter_tensor(const std::vector<char>& flat, int p) const {
    const Parameter& parameter = network.parameters()[p];
    return {parameter.name, parameter.dims,
            from_bytes(flat.data() + params[p].offset * dtype_size(policy.master),
                       static_cast<std::size_t>(parameter.elements()), policy.master)};
  }

  Status build();
  void resolve(Op& op) {
    op.buffers.clear();
    for (int slot : op.slots) op.buffers.push_back(slots[root(slot)].buffer);
  }
  std::size_t lay_out_arena();  // assigns arena offsets; returns the arena's size
  Status allocate();
  Status execute(Op& op) { return backend.execute(*op.plan, op.buffers, workspace); }
};

Status TrainingStep::Impl::build() {
  const std::vector<TensorShape>& tensors = network.tensors();
  const std::vector<Layer>& layers = network.layers();
  const std::size_t master_size = dtype_size(policy.master);

  // Parameters: one flat buffer each for values, gradients and momentum.
  for (const Parameter& parameter : network.parameters()) {
    params.push_back({param_total});
    param_total += (parameter.elements() + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
  }
  const std::size_t flat_bytes = static_cast<std::size_t>(param_total) * master_size;
  params_slot = new_slot(flat_bytes);
  grads_slot = new_slot(flat_bytes);
  momentum_slot = new_slot(flat_bytes);
  if (policy.mixed()) {
    compute_params_slot = new_slot();
    CastOp cast;
    cast.count = param_total, cast.from = policy.master, cast.to = policy.compute;
    TB_RETURN_IF_ERROR(
        add_op(weight_cast, cast, {params_slot, compute_params_slot}, 0, Phase::weight_cast));
  }
  // Each tensor's dtype: the input batch in the compute dtype, every other tensor in the
  // dtype of the layer that produces it.
  std::vector<DType> tensor_dtype(tensors.size(), policy.compute);
  for (const Layer& layer : layers) tensor_dtype[layer.output] = policy.layer_dtype(layer.kind);
  labels_slot = new_slot(static_cast<std::size_t>(tensors[network.input].n) * 4);

  // Who reads each tensor; where each reader's gradient for it goes.
  std::vector<std::vector<std::pair<int, int>>> consumers(tensors.size());
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (std::size_t i = 0; i < layers[l].inputs.size(); ++i)
      consumers[layers[l].inputs[i]].push_back({static_cast<int>(l), static_cast<int>(i)});
  value.assign(tensors.size(), -1);
  grad.assign(tensors.size(), -1);
  for (std::size_t t = 0; t < tensors.size(); ++t) value[t] = new_slot();
  // The residual join's backward produces one gradient for both inputs: its readers' targets
  // are that buffer. A tensor with one reader has that reader's target as its gradient; one
  // with several sums the readers' targets.
  std::vector<int> join_diff(layers.size(), -1);
  std::map<std::pair<int, int>, int> target;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].kind == LayerKind::add_relu) join_diff[l] = new_slot();
    for (std::size_t i = 0; i < layers[l].inputs.size(); ++i) {
      const int t = layers[l].inputs[i];
      if (t == network.input) continue;
      const std::pair<int, int> reader = {static_cast<int>(l), static_cast<int>(i)};
      if (join_diff[l] >= 0)
        target[reader] = consumers[t].size() == 1 ? join_diff[l] : alias_slot(join_diff[l]);
      else
        target[reader] = new_slot();
    }
  }
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    if (consumers[t].empty() || static_cast<int>(t) == network.input) continue;
    grad[t] = consumers[t].size() == 1 ? target[consumers[t][0]] : new_slot();
  }

  running.assign(layers.size(), {-1, -1});
  for (std::size_t li = 0; li < layers.size(); ++li) {
    const int l = static_cast<int>(li);
    const Layer& layer = layers[l];
    const int in = layer.inputs.at(0), out = layer.output;
    const TensorShape& x = tensors[in];
    const TensorShape& y = tensors[out];
    const DType dtype = policy.layer_dtype(layer.kind);
    auto weight = [&](int k) {
      const bool copy = policy.mixed() && policy.weight_dtype(layer.kind) == policy.compute;
      return copy ? param_slot(compute_params_slot, layer.params.at(k), policy.compute)
                  : param_slot(params_slot, layer.params.at(k), policy.master);
    };
    auto weight_grad = [&](int k) {
      return param_slot(grads_slot, layer.params.at(k), policy.master);
    };
    // A layer whose dtype differs from its input's reads a converted copy, and its input
    // gradient is converted back (the classifier under mixed precision).
    const bool cast_input = tensor_dtype[in] != dtype;
    if (cast_input && layer.inputs.size() != 1)
      return Status::Failed(
          fmt::format("{}: a layer with several inputs must share their dtype", layer.name));
    int in_value = value[in], cast_diff = -1;
    if (cast_input) {
      CastOp cast;
      cast.count = x.elements(), cast.from = tensor_dtype[in], cast.to = dtype;
      in_value = new_slot();
      TB_RETURN_IF_ERROR(add_op(forward, cast, {value[in], in_value}, l, Phase::forward));
      cast_diff = new_slot();
    }
    auto diff_target = [&](int input) { return cast_input ? cast_diff : target.at({l, input}); };
    switch (layer.kind) {
      case LayerKind::conv: {
        ConvOp op;
        op.mb = x.n, op.ic = x.c, op.ih = x.h, op.iw = x.w, op.oc = y.c;
        op.kh = op.kw = layer.kernel, op.sh = op.sw = layer.stride, op.ph = op.pw = layer.pad;
        op.dtype = dtype, op.layout = layout, op.winograd_allowed = winograd_allowed;
        if (in == network.input) input_consumer_op = static_cast<int>(forward.size());
        TB_RETURN_IF_ERROR(
            add_op(forward, op, {in_value, weight(0), value[out]}, l, Phase::forward));
        if (in != network.input) {
          op.direction = ConvDirection::backward_data;
          TB_RETURN_IF_ERROR(
              add_op(backward, op, {grad[out], weight(0), diff_target(0)}, l, Phase::backward));
        }
        op.direction = ConvDirection::backward_weights;
        TB_RETURN_IF_ERROR(
            add_op(backward, op, {in_value, grad[out], weight_grad(0)}, l, Phase::backward));
        break;
      }
      case LayerKind::batch_norm: {
        BatchNormOp op;
        op.mb = x.n, op.channels = x.c, op.h = x.h, op.w = x.w;
        op.fuse_relu = layer.relu, op.dtype = dtype, op.layout = layout;
        const std::size_t channel_bytes = static_cast<std::size_t>(x.c) * dtype_size(channel_dtype);
        const int mean = new_slot(), variance = new_slot(), mask = layer.relu ? new_slot() : -1;
        running[l] = {new_slot(channel_bytes), new_slot(channel_bytes)};
        std::vector<int> fwd = {in_value, weight(0), weight(1),        value[out],
                                mean,     variance,  running[l].first, running[l].second};
        if (mask >= 0) fwd.push_back(mask);
        TB_RETURN_IF_ERROR(add_op(forward, op, fwd, l, Phase::forward));
        op.pass = Pass::backward;
        std::vector<int> bwd = {in_value, grad[out], weight(0), weight(1), mean, variance};
        if (mask >= 0) bwd.push_back(mask);
        bwd.insert(bwd.end(), {diff_target(0), weight_grad(0), weight_grad(1)});
        TB_RETURN_IF_ERROR(add_op(backward, op, bwd, l, Phase::backward));
        break;
      }
      case LayerKind::max_pool:
      case LayerKind::global_avg_pool: {
        PoolOp op;
        const bool max = layer.kind == LayerKind::max_pool;
        op.kind = max ? PoolKind::max : PoolKind::global_average;
        op.mb = x.n, op.channels = x.c, op.ih = x.h, op.iw = x.w;
        op.kh = max ? layer.kernel : x.h, op.kw = max ? layer.kernel : x.w;
        op.sh = op.sw = max ? layer.stride : 1, op.ph = op.pw = max ? layer.pad : 0;
        op.dtype = dtype, op.layout = layout;
        const int indices = max ? new_slot() : -1;
        std::vector<int> fwd = {in_value, value[out]}, bwd = {grad[out]};
        if (max) fwd.push_back(indices), bwd.push_back(indices);
        bwd.push_back(diff_target(0));
        TB_RETURN_IF_ERROR(add_op(forward, op, fwd, l, Phase::forward));
        op.pass = Pass::backward;
        TB_RETURN_IF_ERROR(add_op(backward, op, bwd, l, Phase::backward));
        break;
      }
      case LayerKind::fully_connected: {
        FullyConnectedOp op;
        op.mb = x.n, op.in = x.c * x.h * x.w, op.out = y.c, op.dtype = dtype;
        TB_RETURN_IF_ERROR(
            add_op(forward, op, {in_value, weight(0), weight(1), value[out]}, l, Phase::forward));
        op.direction = ConvDirection::backward_data;
        TB_RETURN_IF_ERROR(
            add_op(backward, op, {grad[out], weight(0), diff_target(0)}, l, Phase::backward));
        op.direction = ConvDirection::backward_weights;
        TB_RETURN_IF_ERROR(add_op(backward, op,
                                  {in_value, grad[out], weight_grad(0), weight_grad(1)}, l,
                                  Phase::backward));
        break;
      }
      case LayerKind::add_relu: {
        BinaryOp add;
        add.count = y.elements(), add.fuse_relu = true, add.dtype = dtype;
        TB_RETURN_IF_ERROR(add_op(forward, add, {in_value, value[layer.inputs.at(1)], value[out]},
                                  l, Phase::forward));
        EltwiseOp relu;
        relu.pass = Pass::backward, relu.count = y.elements(), relu.dtype = dtype;
        TB_RETURN_IF_ERROR(
            add_op(backward, relu, {value[out], grad[out], join_diff[l]}, l, Phase::backward));
        break;
      }
      case LayerKind::softmax_cross_entropy: {
        SoftmaxCrossEntropyOp op;
        op.rows = x.n, op.classes = x.c * x.h * x.w, op.dtype = dtype;
        const int probabilities = new_slot();
        loss_slot = value[out];
        TB_RETURN_IF_ERROR(add_op(forward, op, {in_value, labels_slot, probabilities, loss_slot}, l,
                                  Phase::forward));
        op.pass = Pass::backward;
        TB_RETURN_IF_ERROR(
            add_op(backward, op, {probabilities, labels_slot, diff_target(0)}, l, Phase::backward));
        break;
      }
    }
    if (cast_input && in != network.input) {
      CastOp back;
      back.count = x.elements(), back.from = dtype, back.to = tensor_dtype[in];
      TB_RETURN_IF_ERROR(
          add_op(backward, back, {cast_diff, target.at({l, 0})}, l, Phase::backward));
    }
  }
  // Backward runs in reverse layer order; a layer's ops keep their order. Before a layer's
  // backward, the gradients its output received from several readers are summed.
  std::vector<Op> ordered;
  std::vector<std::vector<Op>> by_layer(layers.size());
  for (Op& op : backward) by_layer[op.layer].push_back(std::move(op));
  backward.clear();
  for (int l = static_cast<int>(layers.size()) - 1; l >= 0; --l) {
    const int out = layers[l].output;
    if (consumers[out].size() > 1) {
      BinaryOp sum;
      sum.count = tensors[out].elements(), sum.dtype = tensor_dtype[out];
      int accumulated = target.at(consumers[out][0]);
      for (std::size_t k = 1; k < consumers[out].size(); ++k) {
        TB_RETURN_IF_ERROR(add_op(ordered, sum,
                                  {accumulated, target.at(consumers[out][k]), grad[out]}, l,
                                  Phase::backward));
        accumulated = grad[out];
      }
    }
    for (Op& op : by_layer[l]) ordered.push_back(std::move(op));
  }
  backward = std::move(ordered);

  OptimizerOp sgd;
  sgd.count = param_total, sgd.dtype = policy.master;
  std::vector<Op> list;
  TB_RETURN_IF_ERROR(
      add_op(list, sgd, {params_slot, grads_slot, momentum_slot, new_slot()}, 0, Phase::optimizer));
  optimizer = std::move(list.front());
  if (input_consumer_op < 0) return Status::Failed("no layer reads the network's input");
  return Status::Ok();
}

std::size_t TrainingStep::Impl::lay_out_arena() {
  std::size_t total = 0;
  for (Slot& slot : slots) {
    if (slot.alias >= 0 || slot.base >= 0 || slot.bytes == 0) continue;
    const std::size_t alignment = slot.bytes >= kLargeAlignment ? kLargeAlignment : kSmallAlignment;
    slot.offset = align_up(total, alignment);
    total = slot.offset + slot.bytes;
  }
  return total;
}

Status TrainingStep::Impl::allocate() {
  const std::size_t total = lay_out_arena();
  TB_RETURN_IF_ERROR(backend.allocate(std::max<std::size_t>(total, 1), &arena));
  if (workspace_bytes > 0) TB_RETURN_IF_ERROR(backend.allocate(workspace_bytes, &workspace));
  TB_RETURN_IF_ERROR(
      backend.allocate_host(kSgdHyperCount * sizeof(float), /*pinned=*/false, &hyper));
  for (Slot& slot : slots)
    if (slot.alias < 0 && slot.base < 0)
      slot.buffer = {static_cast<char*>(arena.data) + slot.offset, slot.bytes, arena.kind};
  for (Slot& slot : slots)
    if (slot.base >= 0) {
      const Buffer& base = slots[root(slot.base)].buffer;
      slot.buffer = {static_cast<char*>(base.data) + slot.base_offset, slot.bytes, base.kind};
    }
  // The optimizer's hyper-parameters live in host memory (they change per step).
  const int hyper_slot = optimizer.slots.back();
  slots[hyper_slot].buffer = hyper;
  for (std::vector<Op>* list : {&weight_cast, &forward, &backward})
    for (Op& op : *list) resolve(op);
  resolve(optimizer);
  return Status::Ok();
}

Status TrainingStep::create(Backend& backend, const Network& network, const StepOptions& options,
                            std::unique_ptr<TrainingStep>* out) {
  if (options.dtype != DType::f32 && options.dtype != DType::f64 && options.dtype != DType::bf16)
    return Status::Unimplemented(
        fmt::format("training steps run in f32, bf16 (mixed) and f64 (the reference), not {}",
                    dtype_name(options.dtype)));
  auto impl = std::make_unique<Impl>(backend, network, options);
  TB_RETURN_IF_ERROR(impl->build());
  TB_RETURN_IF_ERROR(impl->allocate());
  out->reset(new TrainingStep(std::move(impl)));
  return Status::Ok();
}

Status TrainingStep::planned_bytes(Backend& backend, const Network& network,
                                   const StepOptions& options, std::uint64_t* out) {
  Impl plan(backend, network, options);
  TB_RETURN_IF_ERROR(plan.build());
  *out = plan.lay_out_arena() + plan.workspace_bytes;
  return Status::Ok();
}

TrainingStep::TrainingStep(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TrainingStep::~TrainingStep() = default;

Status TrainingStep::set_batch(const std::vector<float>& images,
                               const std::vector<std::int32_t>& labels) {
  Impl& s = *impl_;
  const TensorShape& in = s.network.tensors()[s.network.input];
  if (static_cast<std::int64_t>(images.size()) != in.elements() ||
      static_cast<std::int64_t>(labels.size()) != in.n)
    return Status::InvalidArgument(
        fmt::format("batch has {} values and {} labels; the network takes {} and {}", images.size(),
                    labels.size(), in.elements(), in.n));
  for (std::int32_t label : labels)
    if (label < 0 || label >= s.network.classes)
      return Status::InvalidArgument(
          fmt::format("label {} outside [0, {})", label, s.network.classes));
  const std::vector<char> bytes =
      to_bytes(std::vector<double>(images.begin(), images.end()), s.policy.compute);
  const Impl::Op& consumer = s.forward[s.input_consumer_op];
  TB_RETURN_IF_ERROR(s.backend.import_operand(*consumer.plan, 0, bytes.data(),
                                              s.slots[s.root(s.value[s.network.input])].buffer));
  return s.backend.upload(labels.data(), s.slots[s.labels_slot].buffer,
                          labels.size() * sizeof(std::int32_t));
}

Status TrainingStep::initialize_parameters(std::uint64_t seed) {
  Impl& s = *impl_;
  std::vector<double> flat(static_cast<std::size_t>(s.param_total), 0.0);
  const std::vector<Parameter>& parameters = s.network.parameters();
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    const Parameter& parameter = parameters[p];
    const std::uint64_t stream = mix64(seed + p);
    for (std::int64_t i = 0; i < parameter.elements(); ++i) {
      double& v = flat[static_cast<std::size_t>(s.params[p].offset + i)];
      switch (parameter.init) {
        case ParamInit::kaiming_normal_fan_out:
          v = normal(stream, i) * std::sqrt(2.0 / static_cast<double>(parameter.fan_out));
          break;
        case ParamInit::linear_uniform:
          v = uniform(stream, i) / std::sqrt(static_cast<double>(parameter.fan_in));
          break;
        case ParamInit::ones:
          v = 1.0;
          break;
        case ParamInit::zeros:
          v = 0.0;
          break;
      }
    }
  }
  const std::vector<char> values = to_bytes(flat, s.policy.master);
  const std::vector<char> zeros(values.size(), 0);
  TB_RETURN_IF_ERROR(s.backend.upload(values.data(), s.slots[s.params_slot].buffer, values.size()));
  TB_RETURN_IF_ERROR(s.backend.upload(zeros.data(), s.slots[s.grads_slot].buffer, zeros.size()));
  TB_RETURN_IF_ERROR(s.backend.upload(zeros.data(), s.slots[s.momentum_slot].buffer, zeros.size()));
  for (const auto& [mean, variance] : s.running) {
    if (mean < 0) continue;
    const std::size_t count = s.slots[mean].bytes / dtype_size(s.channel_dtype);
    const std::vector<char> zero = to_bytes(std::vector<double>(count, 0.0), s.channel_dtype),
                            one = to_bytes(std::vector<double>(count, 1.0), s.channel_dtype);
    TB_RETURN_IF_ERROR(s.backend.upload(zero.data(), s.slots[mean].buffer, zero.size()));
    TB_RETURN_IF_ERROR(s.backend.upload(one.data(), s.slots[variance].buffer, one.size()));
  }
  steps_taken_ = 0;
  return Status::Ok();
}

Status TrainingStep::run(bool update, const SgdSettings& sgd, StepBreakdown* breakdown) {
  Impl& s = *impl_;
  std::unique_ptr<Timer> timer;
  std::unique_ptr<Timer> total;
  if (breakdown) {
    *breakdown = {};
    for (const Layer& layer : s.network.layers())
      breakdown->layers.push_back({layer.name, layer_kind_name(layer.kind)});
    timer = s.backend.make_timer();
    total = s.backend.make_timer();
    total->start();
  }
  auto run_op = [&](Impl::Op& op) -> Status {
    if (!breakdown) return s.execute(op);
    timer->start();
    TB_RETURN_IF_ERROR(s.execute(op));
    const double seconds = timer->stop_seconds();
    if (op.phase == Phase::forward) breakdown->layers[op.layer].forward_s += seconds;
    if (op.phase == Phase::backward) breakdown->layers[op.layer].backward_s += seconds;
    if (op.phase == Phase::optimizer) breakdown->optimizer_s += seconds;
    if (op.phase == Phase::weight_cast) breakdown->weight_cast_s += seconds;
    return Status::Ok();
  };
  for (Impl::Op& op : s.weight_cast) TB_RETURN_IF_ERROR(run_op(op));
  for (Impl::Op& op : s.forward) TB_RETURN_IF_ERROR(run_op(op));
  for (Impl::Op& op : s.backward) TB_RETURN_IF_ERROR(run_op(op));
  if (update) {
    const float hyper[kSgdHyperCount] = {sgd.learning_rate, sgd.momentum, sgd.weight_decay};
    TB_RETURN_IF_ERROR(s.backend.upload(hyper, s.hyper, sizeof(hyper)));
    TB_RETURN_IF_ERROR(run_op(s.optimizer));
    ++steps_taken_;
  }
  if (breakdown) breakdown->total_s = total->stop_seconds();
  return Status::Ok();
}

Status TrainingStep::loss(double* out) {
  Impl& s = *impl_;
  std::vector<char> bytes(dtype_size(s.policy.head));
  TB_RETURN_IF_ERROR(
      s.backend.download(s.slots[s.root(s.loss_slot)].buffer, bytes.data(), bytes.size()));
  *out = from_bytes(bytes.data(), 1, s.policy.head)[0];
  return Status::Ok();
}

Status TrainingStep::state(std::vector<NamedTensor>* out) {
  Impl& s = *impl_;
  out->clear();
  std::vector<char> flat;
  TB_RETURN_IF_ERROR(s.download_slot(s.params_slot, &flat));
  for (const Impl::StateEntry& entry : s.state_entries()) {
    if (entry.parameter >= 0) {
      out->push_back(s.parameter_tensor(flat, entry.parameter));
    } else if (entry.running_slot >= 0) {
      std::vector<char> bytes;
      TB_RETURN_IF_ERROR(s.download_slot(entry.running_slot, &bytes));
      out->push_back(
          {entry.name, entry.dims,
           from_bytes(bytes.data(), static_cast<std::size_t>(entry.dims[0]), s.channel_dtype)});
    } else {
      out->push_back({entry.name, entry.dims, {static_cast<double>(steps_taken_)}, true});
    }
  }
  return Status::Ok();
}

Status TrainingStep::load_state(const std::vector<NamedTensor>& tensors) {
  Impl& s = *impl_;
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& tensor : tensors) by_name[tensor.name] = &tensor;
  const std::vector<Impl::StateEntry> entries = s.state_entries();
  std::map<std::string, const Impl::StateEntry*> known;
  for (const Impl::StateEntry& entry : entries) {
    if (!by_name.count(entry.name))
      return Status::InvalidArgument(fmt::format("state has no tensor '{}'", entry.name));
    known[entry.name] = &entry;
  }
  for (const NamedTensor& tensor : tensors) {
    const auto match = known.find(tensor.name);
    if (match == known.end())
      return Status::InvalidArgument(fmt::format("unknown tensor '{}'", tensor.name));
    std::size_t count = 1;
    for (std::int64_t dim : match->second->dims) count *= static_cast<std::size_t>(dim);
    if (match->second->dims != tensor.dims || count != tensor.values.size())
      return Status::InvalidArgument(fmt::format("tensor '{}' has the wrong shape", tensor.name));
  }
  std::vector<double> flat(static_cast<std::size_t>(s.param_total), 0.0);
  for (const Impl::StateEntry& entry : entries) {
    const NamedTensor& tensor = *by_name.at(entry.name);
    if (entry.parameter >= 0) {
      std::copy(tensor.values.begin(), tensor.values.end(),
                flat.begin() + s.params[entry.parameter].offset);
    } else if (entry.running_slot >= 0) {
      const std::vector<char> values = to_bytes(tensor.values, s.channel_dtype);
      TB_RETURN_IF_ERROR(
          s.backend.upload(values.data(), s.slots[entry.running_slot].buffer, values.size()));
    }
  }
  const std::vector<char> bytes = to_bytes(flat, s.policy.master);
  return s.backend.upload(bytes.data(), s.slots[s.params_slot].buffer, bytes.size());
}

Status TrainingStep::gradients(std::vector<NamedTensor>* out) {
  Impl& s = *impl_;
  out->clear();
  std::vector<char> flat;
  TB_RETURN_IF_ERROR(s.download_slot(s.grads_slot, &flat));
  for (std::size_t p = 0; p < s.network.parameters().size(); ++p)
    out->push_back(s.parameter_tensor(flat, static_cast<int>(p)));
  return Status::Ok();
}

namespace {

// An operand in its plain layout, as doubles.
Status export_values(Backend& backend, const Plan& plan, int index, Buffer buffer,
                     std::vector<double>* out) {
  const OperandSpec& spec = plan.operands()[index];
  std::vector<char> bytes(spec.elements() * dtype_size(spec.dtype));
  TB_RETURN_IF_ERROR(backend.export_operand(plan, index, buffer, bytes.data()));
  *out = from_bytes(bytes.data(), spec.elements(), spec.dtype);
  return Status::Ok();
}

Status import_values(Backend& backend, const Plan& plan, int index,
                     const std::vector<double>& values, Buffer buffer) {
  const std::vector<char> bytes = to_bytes(values, plan.operands()[index].dtype);
  return backend.import_operand(plan, index, bytes.data(), buffer);
}


}  // namespace

Status TrainingStep::check_ops(OpCheck* out) {
  Impl& s = *impl_;
  *out = {};
  out->passed = true;
  std::map<int, std::vector<double>> reference_state;  // masks and indices the f64 forward made
  for (std::vector<Impl::Op>* list : {&s.forward, &s.backward}) {
    for (Impl::Op& op : *list) {
      const std::optional<OpDesc> reference = reference_op(op.desc);
      if (!reference) continue;
      std::unique_ptr<Plan> plan;
      TB_RETURN_IF_ERROR(s.backend.plan(*reference, &plan));
      std::vector<Buffer> buffers(plan->operands().size());
      Buffer workspace;
      auto release = [&] {
        for (Buffer buffer : buffers)
          if (buffer.data) s.backend.release(buffer);
        if (workspace.data) s.backend.release(workspace);
      };
      Status status = Status::Ok();
      for (std::size_t i = 0; i < buffers.size() && status.ok(); ++i)
        status =
            s.backend.allocate(std::max<std::size_t>(plan->operands()[i].bytes, 1), &buffers[i]);
      if (status.ok() && plan->workspace_bytes() > 0)
        status = s.backend.allocate(plan->workspace_bytes(), &workspace);
      const std::string& layer = s.network.layers()[op.layer].name;
      for (std::size_t i = 0; i < buffers.size() && status.ok(); ++i) {
        const OperandSpec& spec = plan->operands()[i];
        if (spec.is_output && !in_place_operand(spec.name)) continue;
        const int slot = s.root(op.slots[i]);
        std::vector<double> values;
        if (opaque_operand(spec.name)) {
          const auto saved = reference_state.find(slot);
          if (saved == reference_state.end()) {
            status = Status::Failed(fmt::format("{}: no reference {} to read", layer, spec.name));
            break;
          }
          values = saved->second;
        } else {
          status = export_values(s.backend, *op.plan, static_cast<int>(i), s.slots[slot].buffer,
                                 &values);
        }
        if (status.ok())
          status = import_values(s.backend, *plan, static_cast<int>(i), values, buffers[i]);
      }
      if (status.ok()) status = s.backend.execute(*plan, buffers, workspace);
      for (std::size_t i = 0; i < buffers.size() && status.ok(); ++i) {
        const OperandSpec& spec = plan->operands()[i];
        if (!spec.is_output || in_place_operand(spec.name)) continue;
        const int slot = s.root(op.slots[i]);
        std::vector<double> want, got;
        status = export_values(s.backend, *plan, static_cast<int>(i), buffers[i], &want);
        if (!status.ok()) break;
        if (opaque_operand(spec.name)) {
          reference_state[slot] = std::move(want);
          continue;
        }
        status =
            export_values(s.backend, *op.plan, static_cast<int>(i), s.slots[slot].buffer, &got);
        if (!status.ok()) break;
        const double error = relative_l2_error(got, want);
        const double tolerance = op_tolerance(op.plan->operands()[i].dtype);
        ++out->outputs_compared;
        if (error / tolerance > out->worst_error / std::max(out->worst_tolerance, 1e-300) ||
            out->outputs_compared == 1) {
          out->worst_error = error;
          out->worst_tolerance = tolerance;
          out->worst_output = fmt::format("{} {} {}", layer, op_name(op.desc), spec.name);
        }
        if (!(error <= tolerance)) out->passed = false;
      }
      release();
      TB_RETURN_IF_ERROR(status);
      ++out->ops_checked;
    }
  }
  return Status::Ok();
}

std::uint64_t TrainingStep::memory_bytes() const {
  return impl_->arena.bytes + impl_->workspace.bytes;
}

std::vector<std::string> TrainingStep::implementations() const {
  std::map<std::string, int> counts;
  for (const std::vector<Impl::Op>* list : {&impl_->weight_cast, &impl_->forward, &impl_->backward})
    for (const Impl::Op& op : *list) ++counts[op.plan->implementation()];
  ++counts[impl_->optimizer.plan->implementation()];
  std::vector<std::string> lines;
  for (const auto& [name, count] : counts) lines.push_back(fmt::format("{} x{}", name, count));
  return lines;
}

std::uint64_t estimate_training_bytes(const Network& network, DType dtype) {
  // Each activation is kept for backward and has a gradient, and the tensors read twice have a
  // partial gradient: 2.25 copies of every tensor in the compute dtype, calibrated on the
  // planned ResNet-50 step (fp32 batch 32: 8.25 GB planned, 8.40 GB estimated; batch 85:
  // 21.38 and 21.80 GB). Parameters, gradients and momentum stay in the master dtype.
  constexpr double kCopiesPerTensor = 2.25;
  const PrecisionPolicy policy = PrecisionPolicy::for_compute(dtype);
  double bytes = 0;
  for (const TensorShape& tensor : network.tensors())
    bytes += kCopiesPerTensor * static_cast<double>(tensor.elements()) * dtype_size(policy.compute);
  bytes += 3.0 * static_cast<double>(network.parameter_count()) * dtype_size(policy.master);
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace tb
