#include "models/training_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numbers>
#include <optional>

#include <fmt/format.h>

#include "models/host_values.h"
#include "models/precision.h"
#include "models/sampled_reference.h"

#include "backends/cpu/low_precision.h"
#include "backends/numeric.h"
#include "backends/registry.h"
#include "backends/seeded.h"

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

// An operand's values in double; `scratch` (optional) holds the raw bytes between calls.
Status export_values(Backend& backend, const Plan& plan, int index, Buffer buffer,
                     std::vector<double>* out, std::vector<char>* scratch = nullptr) {
  const OperandSpec& spec = plan.operands()[index];
  std::vector<char> local;
  std::vector<char>& bytes = scratch ? *scratch : local;
  bytes.resize(spec.elements() * dtype_size(spec.dtype));
  TB_RETURN_IF_ERROR(backend.export_operand(plan, index, buffer, bytes.data()));
  from_bytes(bytes.data(), spec.elements(), spec.dtype, out);
  return Status::Ok();
}

Status import_values(Backend& backend, const Plan& plan, int index,
                     const std::vector<double>& values, Buffer buffer) {
  const std::vector<char> bytes = to_bytes(values, plan.operands()[index].dtype);
  return backend.import_operand(plan, index, bytes.data(), buffer);
}

// The same op in f64 on plain layouts: what the shared CPU code computes as the reference.
// A cast has none (its reference is the input rounded: OpChecker::check_cast).
std::optional<OpDesc> reference_op(const OpDesc& desc) {
  return std::visit(
      [](auto op) -> std::optional<OpDesc> {
        if constexpr (std::is_same_v<decltype(op), CastOp>) {
          return std::nullopt;
        } else {
          if constexpr (requires { op.dtype; }) op.dtype = DType::f64;
          if constexpr (requires { op.layout; }) op.layout = Layout::plain;
          if constexpr (requires { op.winograd_allowed; }) op.winograd_allowed = false;
          if constexpr (std::is_same_v<decltype(op), GemmOp>)
            op.a_type = op.b_type = op.c_type = DType::f64;
          return OpDesc(op);
        }
      },
      desc);
}

// Operands whose contents differ by design between implementations (oneDNN's workspace
// formats): the f64 forward's own stand in for them.
bool opaque_operand(const std::string& name) {
  return name == "relu_mask" || name == "indices";
}
// Running statistics, updated in place by a momentum too small to judge within one step:
// never compared.
bool statistics_operand(const std::string& name) {
  return name == "running_mean" || name == "running_var";
}
// Values an op updates in place: the optimizer's weights and state, the unscaled gradients.
bool updated_in_place(const OpDesc& desc, const std::string& name) {
  if (std::holds_alternative<OptimizerOp>(desc))
    return name == "weights" || name == "momentum" || name == "m" || name == "v";
  return std::holds_alternative<UnscaleGradientsOp>(desc) && name == "grads";
}
// Outputs whose previous contents the op reads: in-place statistics and updates, and a tied
// weight's gradient that an embedding's backward adds to.
bool reads_output(const OpDesc& desc, const std::string& name) {
  const auto* embedding = std::get_if<EmbeddingOp>(&desc);
  return statistics_operand(name) || updated_in_place(desc, name) ||
         (embedding && embedding->accumulate && name == "diff_table");
}

// An op over every parameter, checked on sampled tensors where the model is large
// (OpCheckOptions::full_update_limit): at least this many values (a few tensors).
constexpr std::int64_t kUpdateSampleElements = std::int64_t{1} << 20;

// The sums of absolute terms behind a normalization's reductions, by group: batch norm's per
// channel (forward mean: |x| averaged; backward diff_beta: |dy|, diff_gamma: |dy xhat|), layer
// norm's forward mean per row and backward parameter gradients per column. Such a sum cancels
// as a product's can: the stem's diff_beta of a ResNet-50 step at batch 32 sums 401,408 terms
// to 2e-4 of their magnitude, and fp32 leaves 6e-5 relative error there. Empty for other
// outputs; `in` holds the op's plain inputs by operand.
std::vector<double> reduction_magnitude(const OpDesc& desc, const std::vector<OperandSpec>& specs,
                                        const std::vector<std::vector<double>>& in, int output) {
  const std::string& name = specs[output].name;
  auto operand = [&](const char* wanted) -> const std::vector<double>* {
    for (std::size_t i = 0; i < specs.size(); ++i)
      if (specs[i].name == wanted && !in[i].empty()) return &in[i];
    return nullptr;
  };
  std::int64_t groups = 0, elements = 0;
  std::function<std::int64_t(std::int64_t)> group, statistic;  // of element e
  float epsilon = 0;
  if (const auto* bn = std::get_if<BatchNormOp>(&desc); bn && !bn->inference) {
    const std::int64_t plane = bn->h * bn->w, channels = bn->channels;
    groups = channels, elements = bn->mb * channels * plane, epsilon = bn->epsilon;
    group = [=](std::int64_t e) { return e / plane % channels; };
    statistic = group;
  } else if (const auto* ln = std::get_if<LayerNormOp>(&desc)) {
    const std::int64_t cols = ln->cols;
    const bool per_row = ln->pass == Pass::forward;  // statistics per row, gradients per column
    groups = per_row ? ln->rows : cols, elements = ln->rows * cols, epsilon = ln->epsilon;
    group = [=](std::int64_t e) { return per_row ? e / cols : e % cols; };
    statistic = [=](std::int64_t e) { return e / cols; };
  } else {
    return {};
  }
  const std::vector<double>*src = operand("src"), *dy = operand("diff_dst"),
        *mask = operand("relu_mask"), *mean = operand("mean"), *variance = operand("variance");
  const bool forward_mean = name == "mean" && src && !dy;
  const bool backward =
      (name == "diff_beta" || name == "diff_gamma") && src && dy && mean && variance;
  if (!forward_mean && !backward) return {};
  std::vector<double> magnitude(static_cast<std::size_t>(groups), 0.0);
  for (std::int64_t e = 0; e < elements; ++e) {
    double term = forward_mean ? (*src)[e] : (mask && (*mask)[e] == 0 ? 0.0 : (*dy)[e]);
    if (name == "diff_gamma") {
      const std::int64_t k = statistic(e);
      term *= ((*src)[e] - (*mean)[k]) / std::sqrt((*variance)[k] + epsilon);
    }
    magnitude[group(e)] += std::fabs(term);
  }
  if (forward_mean)
    for (double& m : magnitude) m /= static_cast<double>(elements / groups);
  return magnitude;
}

// A check that must hold to rounding of f64: a cast's output, a flag, an index.
constexpr double kExactTolerance = 1e-12;

// An output whose norm is below this fraction of the norm of the magnitudes it sums has
// cancelled: its relative error measures rounding, not correctness.
constexpr double kCancellation = 1e-3;

double l2_norm(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v * v;
  return std::sqrt(sum);
}

// Sums of products of the inputs (linear in each): the forward error bound applies.
bool is_product(const OpDesc& desc) {
  return std::holds_alternative<GemmOp>(desc) || std::holds_alternative<ConvOp>(desc) ||
         std::holds_alternative<FullyConnectedOp>(desc);
}

double op_tolerance(DType output) {
  switch (output) {
    case DType::bf16:
      return 2e-2;  // one bf16 rounding of the output (2^-9) with room for accumulation order
    case DType::f16:
    case DType::tf32:
      return 5e-3;  // one f16 rounding of the output, or of TF32 inputs (2^-11), likewise
    case DType::f64:
      return 1e-9;
    default:
      return 1e-4;  // fp32 accumulation over long reductions, Winograd transforms included
  }
}

}  // namespace

struct TrainingStep::Impl {
  // A region of the arena or of host memory, an alias of another slot, or a view into another
  // slot.
  struct Slot {
    std::size_t bytes = 0;
    int alias = -1;               // same memory as that slot
    int base = -1;                // a view into that slot ...
    std::size_t base_offset = 0;  // ... at this byte offset
    std::size_t offset = 0;       // in the arena (or the host block), for owned slots
    bool host = false;            // host memory: what the host writes every step
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
  // Where a network input enters the step: the first forward op that reads it.
  struct InputBinding {
    int op = -1, operand = -1;
  };

  Backend& backend;
  const Network network;
  PrecisionPolicy policy;
  DType channel_dtype;  // batch-norm statistics, scale and shift; layer-norm ones; masks
  StepOptions options;
  std::vector<Slot> slots;
  std::vector<Op> weight_cast, forward, backward;  // weight_cast: the compute copy (mixed)
  Op optimizer;
  std::vector<ParamView> params;
  std::int64_t param_total = 0;  // elements, padding included
  int params_slot = -1, grads_slot = -1;
  std::vector<int> optimizer_state_slots;       // momentum, or AdamW's / LAMB's two moments
  int tensor_offsets_slot = -1;                 // LAMB: where each parameter tensor starts
  int hyper_slot = -1, dropout_step_slot = -1;  // host memory
  // Loss scaling (models/precision.h): the scale and its inverse in host memory, the
  // unscale-and-check op after backward and the flag it writes.
  std::optional<DynamicLossScale> scaler;
  int loss_scale_slot = -1, inverse_scale_slot = -1, nonfinite_slot = -1;
  std::optional<Op> unscale;
  std::unique_ptr<GradientExchange> exchange;  // data parallel: the buckets' all-reduces
  std::vector<char> export_scratch;            // layer_output's raw bytes, kept between calls
  std::vector<int> loss_slots;
  int compute_params_slot = -1;  // the parameters in the compute dtype (mixed precision)
  std::vector<int> value, grad;  // per tensor
  std::vector<std::pair<int, int>> running;  // per layer: running mean / var slots (-1: none)
  std::vector<InputBinding> input_bindings;  // per network input
  Buffer arena, host_block, workspace;
  std::size_t workspace_bytes = 0;

  Impl(Backend& b, const Network& n, const StepOptions& step_options)
      : backend(b),
        network(n),
        policy(PrecisionPolicy::for_compute(step_options.dtype)),
        channel_dtype(step_options.dtype == DType::f64 ? step_options.dtype : DType::f32),
        options(step_options) {
    const bool scaled =
        options.loss_scaling == LossScaling::dynamic ||
        (options.loss_scaling == LossScaling::by_precision && policy.needs_loss_scaling());
    if (scaled && !options.evaluation) scaler = DynamicLossScale{options.initial_loss_scale};
  }

  ~Impl() {
    for (Buffer buffer : {arena, host_block, workspace})
      if (buffer.data) backend.release(buffer);
  }

  int new_slot(std::size_t bytes = 0) {
    slots.push_back({bytes});
    return static_cast<int>(slots.size()) - 1;
  }
  int host_slot(std::size_t bytes) {
    const int slot = new_slot(bytes);
    slots[slot].host = true;
    return slot;
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
  DType slot_dtype_of_base(int base) const {
    return base == compute_params_slot ? policy.compute : policy.master;
  }

  Status add_op(std::vector<Op>& list, const OpDesc& desc, std::vector<int> operand_slots,
                int layer, Phase phase) {
    std::unique_ptr<Plan> plan;
    const Status status = backend.plan(desc, &plan);
    const std::string& where = network.layers()[layer].name;
    if (!status.ok())
      return Status(status.code(),
                    fmt::format("{} ({}): {}", where, op_name(desc), status.message()));
    if (plan->operands().size() != operand_slots.size())
      return Status::Failed(fmt::format("{}: the {} plan takes {} operands, the step gives {}",
                                        where, op_name(desc), plan->operands().size(),
                                        operand_slots.size()));
    for (std::size_t i = 0; i < operand_slots.size(); ++i) {
      Slot& slot = slots[root(operand_slots[i])];
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

  // The framework's state dict, in its order: each parameter (a tied one once, where its first
  // user lists it), and after a batch norm's parameters its running statistics and counter.
  struct StateEntry {
    std::string name;
    std::vector<std::int64_t> dims;
    int parameter = -1;     // a parameter id, or
    int running_slot = -1;  // a running-statistics slot, or neither: num_batches_tracked
  };
  std::vector<StateEntry> state_entries() const {
    std::vector<StateEntry> entries;
    std::vector<bool> listed(network.parameters().size(), false);
    for (std::size_t l = 0; l < network.layers().size(); ++l) {
      const Layer& layer = network.layers()[l];
      for (int p : layer.params) {
        if (listed[p]) continue;
        listed[p] = true;
        entries.push_back({network.parameters()[p].name, network.parameters()[p].dims, p});
      }
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
  Status add_layer_ops(int l, const std::vector<DType>& tensor_dtype,
                       const std::map<std::pair<int, int>, int>& target,
                       const std::vector<int>& join_diff, const std::vector<int>& last_user);
  Status add_optimizer();
  void resolve(Op& op) {
    op.buffers.clear();
    for (int slot : op.slots) op.buffers.push_back(slots[root(slot)].buffer);
  }
  std::size_t lay_out(bool host);  // assigns offsets in the arena or host block; returns size
  Status allocate();
  Status execute(Op& op) { return backend.execute(*op.plan, op.buffers, workspace); }
  // Every planned op of a step, the optimizer and the unscale check included.
  template <typename Visit>
  void for_each_op(Visit&& visit) const {
    for (const std::vector<Op>* list : {&weight_cast, &forward, &backward})
      for (const Op& op : *list) visit(op);
    if (unscale) visit(*unscale);
    if (optimizer.plan) visit(optimizer);
  }
  // "layer4.0.conv2 conv backward" (the optimizer and weight casts name their phase).
  std::string op_label(const Op& op) const {
    switch (op.phase) {
      case Phase::weight_cast:
        return fmt::format("weight cast {}", op_name(op.desc));
      case Phase::optimizer:
        return fmt::format("optimizer {}", op_name(op.desc));
      default:
        return fmt::format("{} {} {}", network.layers()[op.layer].name, op_name(op.desc),
                           op.phase == Phase::forward ? "forward" : "backward");
    }
  }
  // Dropout masks are a function of the step number: forward and backward agree, and the f64
  // reference of the same step draws the same mask.
  Status write_loss_scale() {
    if (loss_scale_slot < 0) return Status::Ok();
    const double dynamic = scaler ? scaler->scale : 1.0;
    const float scale = static_cast<float>(dynamic / options.data_parallel_ranks),
                inverse = static_cast<float>(1.0 / dynamic);
    TB_RETURN_IF_ERROR(backend.upload(&scale, slots[loss_scale_slot].buffer, sizeof(scale)));
    if (inverse_scale_slot < 0) return Status::Ok();
    return backend.upload(&inverse, slots[inverse_scale_slot].buffer, sizeof(inverse));
  }
  // The forward op that writes layer `name`'s output, and which of its operands that is.
  Status find_output(const std::string& name, const Op** op, int* operand) const;
  Status set_dropout_step(std::int64_t step) {
    if (dropout_step_slot < 0) return Status::Ok();
    const auto value = static_cast<std::int32_t>(step);
    return backend.upload(&value, slots[dropout_step_slot].buffer, sizeof(value));
  }
};

Status TrainingStep::Impl::build() {
  const std::vector<TensorShape>& tensors = network.tensors();
  const std::vector<Layer>& layers = network.layers();
  const std::size_t master_size = dtype_size(policy.master);

  // Parameters: one flat buffer each for values, gradients and the optimizer's state.
  for (const Parameter& parameter : network.parameters()) {
    params.push_back({param_total});
    param_total += (parameter.elements() + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
  }
  const std::size_t flat_bytes = static_cast<std::size_t>(param_total) * master_size;
  params_slot = new_slot(flat_bytes);
  grads_slot = new_slot(flat_bytes);
  // The loss gradient's scale: the dynamic loss scale, divided by the data-parallel ranks.
  if (scaler || (options.data_parallel_ranks > 1 && !options.evaluation))
    loss_scale_slot = host_slot(sizeof(float));
  if (policy.mixed()) {
    compute_params_slot = new_slot();
    CastOp cast;
    cast.count = param_total, cast.from = policy.master, cast.to = policy.compute;
    TB_RETURN_IF_ERROR(
        add_op(weight_cast, cast, {params_slot, compute_params_slot}, 0, Phase::weight_cast));
  }
  // Each tensor's dtype: index inputs i32, an attention mask the statistics' dtype, other
  // inputs the compute dtype, every other tensor the dtype of the layer that produces it.
  std::vector<DType> tensor_dtype(tensors.size(), policy.compute);
  for (const NetworkInput& input : network.inputs())
    if (input.indices) tensor_dtype[input.tensor] = DType::i32;
  for (const Layer& layer : layers) {
    tensor_dtype[layer.output] = policy.layer_dtype(layer.kind);
    if (layer.kind == LayerKind::attention_softmax)
      tensor_dtype[layer.inputs.at(1)] = channel_dtype;
  }
  auto is_input = [&](int t) { return network.find_input(t) != nullptr; };

  // Who reads each tensor; where each reader's gradient for it goes.
  std::vector<std::vector<std::pair<int, int>>> consumers(tensors.size());
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (std::size_t i = 0; i < layers[l].inputs.size(); ++i)
      consumers[layers[l].inputs[i]].push_back({static_cast<int>(l), static_cast<int>(i)});
  value.assign(tensors.size(), -1);
  grad.assign(tensors.size(), -1);
  for (std::size_t t = 0; t < tensors.size(); ++t) value[t] = new_slot();
  // A residual join's backward produces one gradient for both inputs (add + ReLU: its ReLU
  // backward; add: its output's gradient itself): its readers' targets are that buffer. A
  // tensor with one reader has that reader's target as its gradient; one with several sums
  // the readers' targets.
  std::vector<int> join_diff(layers.size(), -1);
  std::map<std::pair<int, int>, int> target;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerKind kind = layers[l].kind;
    if (kind == LayerKind::add_relu || kind == LayerKind::add) join_diff[l] = new_slot();
    for (std::size_t i = 0; i < layers[l].inputs.size(); ++i) {
      const int t = layers[l].inputs[i];
      if (is_input(t)) continue;
      const std::pair<int, int> reader = {static_cast<int>(l), static_cast<int>(i)};
      if (join_diff[l] >= 0)
        target[reader] = consumers[t].size() == 1 ? join_diff[l] : alias_slot(join_diff[l]);
      else
        target[reader] = new_slot();
    }
  }
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    if (consumers[t].empty() || is_input(static_cast<int>(t))) continue;
    grad[t] = consumers[t].size() == 1 ? target[consumers[t][0]] : new_slot();
  }
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].kind != LayerKind::add) continue;
    if (grad[layers[l].output] < 0)
      return Status::Failed(
          fmt::format("{}: the residual add's output is never read", layers[l].name));
    slots[join_diff[l]].alias = grad[layers[l].output];
  }
  // A parameter read by several layers (tied weights) gets its gradient from the last of them
  // (its backward runs first) and the others add to it.
  std::vector<int> last_user(network.parameters().size(), -1);
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (int p : layers[l].params) last_user[p] = static_cast<int>(l);

  running.assign(layers.size(), {-1, -1});
  for (std::size_t l = 0; l < layers.size(); ++l)
    TB_RETURN_IF_ERROR(
        add_layer_ops(static_cast<int>(l), tensor_dtype, target, join_diff, last_user));

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

  // Each input enters through the first forward op that reads it, in that op's layout.
  for (const NetworkInput& input : network.inputs()) {
    InputBinding binding;
    for (std::size_t o = 0; o < forward.size() && binding.op < 0; ++o)
      for (std::size_t i = 0; i < forward[o].slots.size(); ++i)
        if (forward[o].slots[i] == value[input.tensor]) {
          binding = {static_cast<int>(o), static_cast<int>(i)};
          break;
        }
    if (binding.op < 0)
      return Status::Failed(fmt::format("no layer reads the network's input '{}'", input.name));
    input_bindings.push_back(binding);
  }
  if (loss_slots.empty()) return Status::Failed("the network has no loss layer");
  return options.evaluation ? Status::Ok() : add_optimizer();
}

Status TrainingStep::Impl::add_layer_ops(int l, const std::vector<DType>& tensor_dtype,
                                         const std::map<std::pair<int, int>, int>& target,
                                         const std::vector<int>& join_diff,
                                         const std::vector<int>& last_user) {
  const std::vector<TensorShape>& tensors = network.tensors();
  const Layer& layer = network.layers()[l];
  const int in = layer.inputs.at(0), out = layer.output;
  const TensorShape& x = tensors[in];
  const TensorShape& y = tensors[out];
  const DType dtype = policy.layer_dtype(layer.kind);
  const bool has_grad = network.find_input(in) == nullptr;
  auto weight = [&](int k) {
    const bool copy = policy.mixed() && policy.weight_dtype(layer.kind) == policy.compute;
    return copy ? param_slot(compute_params_slot, layer.params.at(k), policy.compute)
                : param_slot(params_slot, layer.params.at(k), policy.master);
  };
  auto weight_grad = [&](int k) {
    return param_slot(grads_slot, layer.params.at(k), policy.master);
  };
  for (int p : layer.params)
    if (last_user[p] != l && layer.kind != LayerKind::embedding)
      return Status::Failed(
          fmt::format("{}: a parameter shared with a later layer must be read by an embedding here "
                      "(only its backward adds to a gradient)",
                      layer.name));
  // A layer whose dtype differs from its first input's reads a converted copy, and that
  // input's gradient is converted back (the classifier under mixed precision). A second data
  // input must already share the layer's dtype.
  const bool cast_input = tensor_dtype[in] != dtype && tensor_dtype[in] != DType::i32;
  const bool joins = layer.kind == LayerKind::add_relu || layer.kind == LayerKind::add ||
                     layer.kind == LayerKind::attention_scores ||
                     layer.kind == LayerKind::attention_context;
  const std::size_t data_inputs = layer.kind == LayerKind::attention ? 3 : joins ? 2 : 1;
  for (std::size_t i = 1; i < data_inputs; ++i)
    if (tensor_dtype[layer.inputs.at(i)] != dtype || cast_input)
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
  auto diff_target = [&](int input) {
    return cast_input && input == 0 ? cast_diff : target.at({l, input});
  };
  auto fwd = [&](const OpDesc& op, std::vector<int> operands) {
    return add_op(forward, op, std::move(operands), l, Phase::forward);
  };
  auto bwd = [&](const OpDesc& op, std::vector<int> operands) {
    if (options.evaluation) return Status::Ok();
    return add_op(backward, op, std::move(operands), l, Phase::backward);
  };
  switch (layer.kind) {
    case LayerKind::conv: {
      ConvOp op;
      op.mb = x.n, op.ic = x.c, op.ih = x.h, op.iw = x.w, op.oc = y.c;
      op.kh = op.kw = layer.kernel, op.sh = op.sw = layer.stride, op.ph = op.pw = layer.pad;
      op.dtype = policy.matmul_dtype(dtype), op.layout = options.layout;
      op.winograd_allowed = options.winograd_allowed;
      TB_RETURN_IF_ERROR(fwd(op, {in_value, weight(0), value[out]}));
      if (has_grad) {
        op.direction = ConvDirection::backward_data;
        TB_RETURN_IF_ERROR(bwd(op, {grad[out], weight(0), diff_target(0)}));
      }
      op.direction = ConvDirection::backward_weights;
      TB_RETURN_IF_ERROR(bwd(op, {in_value, grad[out], weight_grad(0)}));
      break;
    }
    case LayerKind::batch_norm: {
      BatchNormOp op;
      op.mb = x.n, op.channels = x.c, op.h = x.h, op.w = x.w;
      op.fuse_relu = layer.relu, op.dtype = dtype, op.layout = options.layout;
      const std::size_t channel_bytes = static_cast<std::size_t>(x.c) * dtype_size(channel_dtype);
      running[l] = {new_slot(channel_bytes), new_slot(channel_bytes)};
      if (options.evaluation) {
        op.inference = true;
        TB_RETURN_IF_ERROR(fwd(
            op, {in_value, weight(0), weight(1), running[l].first, running[l].second, value[out]}));
        break;
      }
      const int mean = new_slot(), variance = new_slot(), mask = layer.relu ? new_slot() : -1;
      std::vector<int> forward_slots = {in_value, weight(0), weight(1),        value[out],
                                        mean,     variance,  running[l].first, running[l].second};
      if (mask >= 0) forward_slots.push_back(mask);
      TB_RETURN_IF_ERROR(fwd(op, forward_slots));
      op.pass = Pass::backward;
      std::vector<int> backward_slots = {in_value, grad[out], weight(0), weight(1), mean, variance};
      if (mask >= 0) backward_slots.push_back(mask);
      backward_slots.insert(backward_slots.end(), {diff_target(0), weight_grad(0), weight_grad(1)});
      TB_RETURN_IF_ERROR(bwd(op, backward_slots));
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
      op.dtype = dtype, op.layout = options.layout;
      const int indices = max ? new_slot() : -1;
      std::vector<int> forward_slots = {in_value, value[out]}, backward_slots = {grad[out]};
      if (max) forward_slots.push_back(indices), backward_slots.push_back(indices);
      backward_slots.push_back(diff_target(0));
      TB_RETURN_IF_ERROR(fwd(op, forward_slots));
      op.pass = Pass::backward;
      TB_RETURN_IF_ERROR(bwd(op, backward_slots));
      break;
    }
    case LayerKind::fully_connected:
    case LayerKind::linear: {
      FullyConnectedOp op;
      op.mb = x.n, op.in = x.c * x.h * x.w, op.out = y.c, op.dtype = policy.matmul_dtype(dtype);
      TB_RETURN_IF_ERROR(fwd(op, {in_value, weight(0), weight(1), value[out]}));
      op.direction = ConvDirection::backward_data;
      TB_RETURN_IF_ERROR(bwd(op, {grad[out], weight(0), diff_target(0)}));
      op.direction = ConvDirection::backward_weights;
      TB_RETURN_IF_ERROR(bwd(op, {in_value, grad[out], weight_grad(0), weight_grad(1)}));
      break;
    }
    case LayerKind::add_relu: {
      BinaryOp add;
      add.count = y.elements(), add.fuse_relu = true, add.dtype = dtype;
      TB_RETURN_IF_ERROR(fwd(add, {in_value, value[layer.inputs.at(1)], value[out]}));
      EltwiseOp relu;
      relu.pass = Pass::backward, relu.count = y.elements(), relu.dtype = dtype;
      TB_RETURN_IF_ERROR(bwd(relu, {value[out], grad[out], join_diff[l]}));
      break;
    }
    case LayerKind::add: {  // backward: both inputs' gradients are the output's (join_diff)
      BinaryOp add;
      add.count = y.elements(), add.dtype = dtype;
      TB_RETURN_IF_ERROR(fwd(add, {in_value, value[layer.inputs.at(1)], value[out]}));
      break;
    }
    case LayerKind::softmax_cross_entropy: {
      SoftmaxCrossEntropyOp op;
      op.rows = x.n, op.classes = x.c * x.h * x.w, op.dtype = dtype;
      const int labels = value[layer.inputs.at(1)], probabilities = new_slot();
      loss_slots.push_back(value[out]);
      TB_RETURN_IF_ERROR(fwd(op, {in_value, labels, probabilities, value[out]}));
      op.pass = Pass::backward, op.scaled = loss_scale_slot >= 0;
      TB_RETURN_IF_ERROR(bwd(
          op, op.scaled ? std::vector<int>{probabilities, labels, loss_scale_slot, diff_target(0)}
                        : std::vector<int>{probabilities, labels, diff_target(0)}));
      break;
    }
    case LayerKind::embedding: {
      const Parameter& table = network.parameters()[layer.params.at(0)];
      EmbeddingOp op;
      op.tokens = x.elements(), op.vocab = table.dims.at(0), op.dim = table.dims.at(1);
      op.dtype = dtype;
      TB_RETURN_IF_ERROR(fwd(op, {weight(0), value[in], value[out]}));
      op.pass = Pass::backward, op.accumulate = last_user[layer.params[0]] != l;
      TB_RETURN_IF_ERROR(bwd(op, {grad[out], value[in], weight_grad(0)}));
      break;
    }
    case LayerKind::gather_rows: {
      EmbeddingOp op;
      op.tokens = tensors[layer.inputs.at(1)].elements(), op.vocab = x.n, op.dim = x.c;
      op.dtype = dtype, op.weight_table = false;
      const int ids = value[layer.inputs[1]];
      TB_RETURN_IF_ERROR(fwd(op, {in_value, ids, value[out]}));
      op.pass = Pass::backward;
      TB_RETURN_IF_ERROR(bwd(op, {grad[out], ids, diff_target(0)}));
      break;
    }
    case LayerKind::layer_norm: {
      LayerNormOp op;
      op.rows = x.n, op.cols = x.c, op.dtype = dtype;
      const int mean = new_slot(), variance = new_slot();
      TB_RETURN_IF_ERROR(fwd(op, {in_value, weight(0), weight(1), value[out], mean, variance}));
      op.pass = Pass::backward;
      TB_RETURN_IF_ERROR(bwd(op, {in_value, grad[out], weight(0), weight(1), mean, variance,
                                  diff_target(0), weight_grad(0), weight_grad(1)}));
      break;
    }
    case LayerKind::gelu:
    case LayerKind::tanh: {
      EltwiseOp op;
      op.kind = layer.kind == LayerKind::gelu ? EltwiseKind::gelu : EltwiseKind::tanh;
      op.count = y.elements(), op.dtype = dtype;
      TB_RETURN_IF_ERROR(fwd(op, {in_value, value[out]}));
      op.pass = Pass::backward;  // GELU's gradient from its input, tanh's from its output
      TB_RETURN_IF_ERROR(bwd(
          op, {op.kind == EltwiseKind::gelu ? in_value : value[out], grad[out], diff_target(0)}));
      break;
    }
    case LayerKind::dropout: {
      if (options.evaluation) {  // the identity: its output is its input
        slots[value[out]].alias = in_value;
        break;
      }
      DropoutOp op;
      op.count = y.elements(), op.probability = layer.probability, op.dtype = dtype;
      op.seed = mix64(options.dropout_seed + static_cast<std::uint64_t>(l) * kGoldenGamma);
      if (dropout_step_slot < 0) dropout_step_slot = host_slot(sizeof(std::int32_t));
      TB_RETURN_IF_ERROR(fwd(op, {in_value, dropout_step_slot, value[out]}));
      op.pass = Pass::backward;
      TB_RETURN_IF_ERROR(bwd(op, {grad[out], dropout_step_slot, diff_target(0)}));
      break;
    }
    case LayerKind::attention_scores:
    case LayerKind::attention_context: {
      // scores[b, h] = Q[b, h] K[b, h]^T; context[b, h] = P[b, h] V[b, h], with Q, K, V and the
      // context head-interleaved as the projections store them.
      const bool scores = layer.kind == LayerKind::attention_scores;
      const std::int64_t sequence = layer.sequence, heads = layer.heads;
      const std::int64_t head_dim = (scores ? x.c : tensors[layer.inputs.at(1)].c) / heads;
      GemmOp op;
      op.batch = x.n / (scores ? sequence : heads * sequence), op.heads = heads;
      op.a_type = op.b_type = policy.matmul_dtype(dtype), op.c_type = dtype;
      const int a = value[in], b = value[layer.inputs.at(1)];
      if (scores) {
        op.m = sequence, op.n = sequence, op.k = head_dim, op.trans_b = true;
        op.a_interleaved = op.b_interleaved = true;
        TB_RETURN_IF_ERROR(fwd(op, {a, b, value[out]}));
        GemmOp dq = op;  // dQ = dS K
        dq.n = head_dim, dq.k = sequence, dq.trans_b = false, dq.a_interleaved = false,
        dq.c_interleaved = true;
        TB_RETURN_IF_ERROR(bwd(dq, {grad[out], b, diff_target(0)}));
        GemmOp dk = dq;  // dK = dS^T Q
        dk.trans_a = true;
        TB_RETURN_IF_ERROR(bwd(dk, {grad[out], a, diff_target(1)}));
      } else {
        op.m = sequence, op.n = head_dim, op.k = sequence;
        op.b_interleaved = op.c_interleaved = true;
        TB_RETURN_IF_ERROR(fwd(op, {a, b, value[out]}));
        GemmOp dp = op;  // dP = dC V^T
        dp.n = sequence, dp.k = head_dim, dp.trans_b = true;
        dp.a_interleaved = true, dp.b_interleaved = true, dp.c_interleaved = false;
        TB_RETURN_IF_ERROR(bwd(dp, {grad[out], b, diff_target(0)}));
        GemmOp dv = op;  // dV = P^T dC
        dv.trans_a = true;
        TB_RETURN_IF_ERROR(bwd(dv, {a, grad[out], diff_target(1)}));
      }
      break;
    }
    case LayerKind::attention: {  // queries, keys, values (head-interleaved), key lengths
      AttentionOp op;
      op.sequence = layer.sequence, op.heads = layer.heads, op.batch = x.n / layer.sequence;
      op.head_dim = x.c / layer.heads, op.scale = layer.scale, op.dtype = dtype;
      const int keys = value[layer.inputs.at(1)], values = value[layer.inputs.at(2)],
                lengths = value[layer.inputs.at(3)], stats = new_slot();
      TB_RETURN_IF_ERROR(fwd(op, {in_value, keys, values, lengths, value[out], stats}));
      op.pass = Pass::backward;
      TB_RETURN_IF_ERROR(bwd(op, {in_value, keys, values, lengths, value[out], stats, grad[out],
                                  diff_target(0), diff_target(1), diff_target(2)}));
      break;
    }
    case LayerKind::attention_softmax: {
      SoftmaxOp op;
      op.rows = x.n, op.cols = x.c, op.masked = true, op.dtype = dtype;
      op.rows_per_mask = layer.heads * layer.sequence;
      op.scale = layer.scale;
      TB_RETURN_IF_ERROR(fwd(op, {in_value, value[layer.inputs.at(1)], value[out]}));
      op.pass = Pass::backward;
      TB_RETURN_IF_ERROR(bwd(op, {value[out], grad[out], diff_target(0)}));
      break;
    }
  }
  if (cast_input && has_grad) {
    CastOp back;
    back.count = x.elements(), back.from = dtype, back.to = tensor_dtype[in];
    TB_RETURN_IF_ERROR(bwd(back, {cast_diff, target.at({l, 0})}));
  }
  return Status::Ok();
}

Status TrainingStep::Impl::add_optimizer() {
  if (scaler) {  // loss scaling: the gradients are unscaled and checked before any update
    UnscaleGradientsOp check;
    check.count = param_total, check.dtype = policy.master;
    inverse_scale_slot = host_slot(sizeof(float));
    nonfinite_slot = new_slot(sizeof(std::int32_t));
    std::vector<Op> list;
    TB_RETURN_IF_ERROR(
        add_op(list, check, {grads_slot, inverse_scale_slot, nonfinite_slot}, 0, Phase::optimizer));
    unscale = std::move(list.front());
  }
  OptimizerOp op;
  op.kind = options.optimizer, op.count = param_total, op.dtype = policy.master;
  op.tensors = static_cast<std::int64_t>(params.size());
  const std::size_t flat_bytes = static_cast<std::size_t>(param_total) * dtype_size(policy.master);
  const int moments = op.kind == OptimizerKind::sgd_momentum ? 1 : 2;
  for (int k = 0; k < moments; ++k) optimizer_state_slots.push_back(new_slot(flat_bytes));
  hyper_slot = host_slot(
      (op.kind == OptimizerKind::sgd_momentum ? kSgdHyperCount : kAdamHyperCount) * sizeof(float));
  std::vector<int> operands = {params_slot, grads_slot};
  operands.insert(operands.end(), optimizer_state_slots.begin(), optimizer_state_slots.end());
  if (op.kind == OptimizerKind::lamb) {
    tensor_offsets_slot = new_slot((params.size() + 1) * sizeof(std::int32_t));
    operands.push_back(tensor_offsets_slot);
  }
  operands.push_back(hyper_slot);
  std::vector<Op> list;
  TB_RETURN_IF_ERROR(add_op(list, op, operands, 0, Phase::optimizer));
  optimizer = std::move(list.front());
  return Status::Ok();
}

std::size_t TrainingStep::Impl::lay_out(bool host) {
  std::size_t total = 0;
  for (Slot& slot : slots) {
    if (slot.alias >= 0 || slot.base >= 0 || slot.bytes == 0 || slot.host != host) continue;
    const std::size_t alignment = slot.bytes >= kLargeAlignment ? kLargeAlignment : kSmallAlignment;
    slot.offset = align_up(total, alignment);
    total = slot.offset + slot.bytes;
  }
  return total;
}

Status TrainingStep::Impl::allocate() {
  TB_RETURN_IF_ERROR(backend.allocate(std::max<std::size_t>(lay_out(false), 1), &arena));
  if (workspace_bytes > 0) TB_RETURN_IF_ERROR(backend.allocate(workspace_bytes, &workspace));
  // What the host writes before each step (optimizer settings, the dropout step) lives in
  // host memory.
  if (const std::size_t host_bytes = lay_out(true); host_bytes > 0)
    TB_RETURN_IF_ERROR(backend.allocate_host(host_bytes, /*pinned=*/false, &host_block));
  for (Slot& slot : slots) {
    const Buffer& block = slot.host ? host_block : arena;
    if (slot.alias < 0 && slot.base < 0)
      slot.buffer = {static_cast<char*>(block.data) + slot.offset, slot.bytes, block.kind};
  }
  for (Slot& slot : slots)
    if (slot.base >= 0) {
      const Buffer& base = slots[root(slot.base)].buffer;
      slot.buffer = {static_cast<char*>(base.data) + slot.base_offset, slot.bytes, base.kind};
    }
  for (std::vector<Op>* list : {&weight_cast, &forward, &backward})
    for (Op& op : *list) resolve(op);
  resolve(optimizer);
  if (unscale) resolve(*unscale);
  TB_RETURN_IF_ERROR(write_loss_scale());
  if (tensor_offsets_slot >= 0) {
    std::vector<std::int32_t> offsets;
    for (const ParamView& view : params) offsets.push_back(static_cast<std::int32_t>(view.offset));
    offsets.push_back(static_cast<std::int32_t>(param_total));
    TB_RETURN_IF_ERROR(backend.upload(offsets.data(), slots[tensor_offsets_slot].buffer,
                                      offsets.size() * sizeof(std::int32_t)));
  }
  return Status::Ok();
}

Status TrainingStep::create(Backend& backend, const Network& network, const StepOptions& options,
                            std::unique_ptr<TrainingStep>* out) {
  const DType d = options.dtype;
  if (options.data_parallel_ranks < 1)
    return Status::InvalidArgument("a data-parallel step needs at least one rank");
  if (d != DType::f32 && d != DType::f64 && d != DType::bf16 && d != DType::f16 && d != DType::tf32)
    return Status::Unimplemented(
        fmt::format("training steps run in f32, tf32, bf16 and f16 (mixed) and f64 (the "
                    "reference), not {}",
                    dtype_name(d)));
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
  *out = plan.lay_out(false) + plan.workspace_bytes;
  return Status::Ok();
}

TrainingStep::TrainingStep(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TrainingStep::~TrainingStep() = default;

Status TrainingStep::set_batch(const std::vector<NamedTensor>& batch) {
  Impl& s = *impl_;
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& tensor : batch) by_name[tensor.name] = &tensor;
  for (const NetworkInput& input : s.network.inputs())
    if (!by_name.count(input.name))
      return Status::InvalidArgument(fmt::format("the batch has no '{}'", input.name));
  if (by_name.size() != s.network.inputs().size())
    return Status::InvalidArgument(fmt::format("the batch has {} tensors; the network takes {}",
                                               by_name.size(), s.network.inputs().size()));
  for (std::size_t k = 0; k < s.network.inputs().size(); ++k) {
    const NetworkInput& input = s.network.inputs()[k];
    const std::vector<double>& values = by_name.at(input.name)->values;
    const std::int64_t expected = s.network.tensors()[input.tensor].elements();
    if (static_cast<std::int64_t>(values.size()) != expected)
      return Status::InvalidArgument(fmt::format("'{}' has {} values; the network takes {}",
                                                 input.name, values.size(), expected));
    if (input.indices)
      for (double v : values)
        if (!(v >= static_cast<double>(input.minimum) && v < static_cast<double>(input.bound)) ||
            v != std::floor(v))
          return Status::InvalidArgument(fmt::format("'{}' holds {}, outside the indices [{}, {})",
                                                     input.name, v, input.minimum, input.bound));
    const Impl::InputBinding binding = s.input_bindings[k];
    const Plan& consumer = *s.forward[binding.op].plan;
    const std::vector<char> bytes = to_bytes(values, consumer.operands()[binding.operand].dtype);
    TB_RETURN_IF_ERROR(s.backend.import_operand(consumer, binding.operand, bytes.data(),
                                                s.slots[s.root(s.value[input.tensor])].buffer));
  }
  return Status::Ok();
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
        case ParamInit::normal_0_02:
          v = 0.02 * normal(stream, i);
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
  for (int slot : s.optimizer_state_slots)
    TB_RETURN_IF_ERROR(s.backend.upload(zeros.data(), s.slots[slot].buffer, zeros.size()));
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

template <typename RunOp>
Status TrainingStep::run_ops(bool update, const OptimizerSettings& settings, RunOp&& run_op) {
  Impl& s = *impl_;
  TB_RETURN_IF_ERROR(s.set_dropout_step(dropout_step()));
  for (Impl::Op& op : s.weight_cast) TB_RETURN_IF_ERROR(run_op(op));
  for (Impl::Op& op : s.forward) TB_RETURN_IF_ERROR(run_op(op));
  for (std::size_t k = 0; k < s.backward.size(); ++k) {
    TB_RETURN_IF_ERROR(run_op(s.backward[k]));
    if (s.exchange) TB_RETURN_IF_ERROR(s.exchange->after_backward_op(static_cast<int>(k)));
  }
  if (s.exchange) TB_RETURN_IF_ERROR(s.exchange->finish());
  if (update && s.options.evaluation)
    return Status::InvalidArgument("an evaluation step has no optimizer to update with");
  if (s.unscale) TB_RETURN_IF_ERROR(run_op(*s.unscale));
  bool apply = update;
  if (update && s.scaler) {  // a step whose gradients overflowed is skipped (a wait for the flag)
    std::int32_t nonfinite = 0;
    TB_RETURN_IF_ERROR(
        s.backend.download(s.slots[s.nonfinite_slot].buffer, &nonfinite, sizeof(nonfinite)));
    apply = s.scaler->update(nonfinite != 0);
    TB_RETURN_IF_ERROR(s.write_loss_scale());
  }
  if (apply) {
    std::vector<float> hyper = {settings.learning_rate, settings.momentum, settings.weight_decay};
    if (s.options.optimizer != OptimizerKind::sgd_momentum)
      hyper = {settings.learning_rate, settings.beta1,        settings.beta2,
               settings.epsilon,       settings.weight_decay, static_cast<float>(steps_taken_ + 1)};
    TB_RETURN_IF_ERROR(
        s.backend.upload(hyper.data(), s.slots[s.hyper_slot].buffer, hyper.size() * sizeof(float)));
    TB_RETURN_IF_ERROR(run_op(s.optimizer));
    ++steps_taken_;
  }
  return Status::Ok();
}

Status TrainingStep::run(bool update, const OptimizerSettings& settings, StepBreakdown* breakdown) {
  Impl& s = *impl_;
  std::unique_ptr<Timer> timer;
  std::unique_ptr<Timer> total;
  if (breakdown) {
    *breakdown = {};
    for (const Layer& layer : s.network.layers())
      breakdown->layers.push_back({layer.name, layer_kind_name(layer.kind), 0, 0, {}});
    for (const std::vector<Impl::Op>* list : {&s.forward, &s.backward})
      for (const Impl::Op& op : *list) {
        std::vector<std::string>& names = breakdown->layers[op.layer].implementations;
        if (std::find(names.begin(), names.end(), op.plan->implementation()) == names.end())
          names.push_back(op.plan->implementation());
      }
    timer = s.backend.make_timer();
    total = s.backend.make_timer();
    total->start();
  }
  auto run_op = [&](Impl::Op& op) -> Status {
    if (!breakdown) return s.execute(op);
    timer->start();
    TB_RETURN_IF_ERROR(s.execute(op));
    timer->stop();
    const double seconds = timer->elapsed_seconds();
    if (op.phase == Phase::forward) breakdown->layers[op.layer].forward_s += seconds;
    if (op.phase == Phase::backward) breakdown->layers[op.layer].backward_s += seconds;
    if (op.phase == Phase::optimizer) breakdown->optimizer_s += seconds;
    if (op.phase == Phase::weight_cast) breakdown->weight_cast_s += seconds;
    if (op.plan->is_reference())
      breakdown->reference_ops.push_back({s.op_label(op), op.plan->implementation(), seconds});
    return Status::Ok();
  };
  TB_RETURN_IF_ERROR(run_ops(update, settings, run_op));
  if (breakdown) {
    total->stop();
    breakdown->total_s = total->elapsed_seconds();
  }
  return Status::Ok();
}

std::int64_t TrainingStep::dropout_step() const {
  // A step skipped by loss scaling still draws its masks: the next one gets fresh masks.
  return steps_taken_ + (impl_->scaler ? impl_->scaler->skipped_steps : 0);
}

const DynamicLossScale* TrainingStep::loss_scale() const {
  return impl_->scaler ? &*impl_->scaler : nullptr;
}

bool DynamicLossScale::update(bool found_nonfinite) {
  if (found_nonfinite) {
    scale *= backoff_factor;
    clean_steps = 0;
    ++skipped_steps;
    return false;
  }
  if (++clean_steps == growth_interval) {
    scale *= growth_factor;
    clean_steps = 0;
  }
  return true;
}

Status TrainingStep::loss(double* out) {
  Impl& s = *impl_;
  *out = 0;
  for (int slot : s.loss_slots) {  // the network's loss is the sum of its loss layers'
    std::vector<char> bytes(dtype_size(s.policy.head));
    TB_RETURN_IF_ERROR(
        s.backend.download(s.slots[s.root(slot)].buffer, bytes.data(), bytes.size()));
    *out += from_bytes(bytes.data(), 1, s.policy.head)[0];
  }
  return Status::Ok();
}

Status TrainingStep::Impl::find_output(const std::string& name, const Op** op_out,
                                       int* operand) const {
  const std::vector<Layer>& layers = network.layers();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].name != name) continue;
    const int slot = root(value[layers[l].output]);
    for (const Op& op : forward)
      for (std::size_t i = 0; i < op.slots.size(); ++i)
        if (op.layer == static_cast<int>(l) && root(op.slots[i]) == slot &&
            op.plan->operands()[i].is_output) {
          *op_out = &op;
          *operand = static_cast<int>(i);
          return Status::Ok();
        }
  }
  return Status::InvalidArgument(fmt::format("no layer '{}' writes an output", name));
}

Status TrainingStep::layer_output(const std::string& name, std::vector<double>* out) {
  Impl& s = *impl_;
  const Impl::Op* op = nullptr;
  int operand = 0;
  TB_RETURN_IF_ERROR(s.find_output(name, &op, &operand));
  return export_values(s.backend, *op->plan, operand, s.slots[s.root(op->slots[operand])].buffer,
                       out, &s.export_scratch);
}

Status TrainingStep::layer_argmax(const std::string& name, std::int64_t cols,
                                  std::vector<std::int32_t>* out) {
  Impl& s = *impl_;
  const Impl::Op* op = nullptr;
  int operand = 0;
  TB_RETURN_IF_ERROR(s.find_output(name, &op, &operand));
  const OperandSpec& spec = op->plan->operands()[operand];
  const std::int64_t count = static_cast<std::int64_t>(spec.elements());
  if (cols <= 0 || count % cols != 0)
    return Status::InvalidArgument(
        fmt::format("{}: {} values are not rows of {}", name, count, cols));
  s.export_scratch.resize(static_cast<std::size_t>(count) * dtype_size(spec.dtype));
  TB_RETURN_IF_ERROR(s.backend.export_operand(
      *op->plan, operand, s.slots[s.root(op->slots[operand])].buffer, s.export_scratch.data()));
  out->resize(static_cast<std::size_t>(count / cols));
  auto argmax = [&]<typename T>(T, auto widen) {
    const T* values = reinterpret_cast<const T*>(s.export_scratch.data());
    for (std::int64_t r = 0; r < count / cols; ++r) {
      const T* row = values + r * cols;
      std::int64_t best = 0;
      float top = widen(row[0]);
      for (std::int64_t c = 1; c < cols; ++c)
        if (const float v = widen(row[c]); v > top) top = v, best = c;
      (*out)[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(best);
    }
  };
  switch (spec.dtype) {
    case DType::bf16:
      argmax(std::uint16_t{}, [](std::uint16_t v) { return cpu::bf16_to_float(v); });
      break;
    case DType::f16:
      argmax(std::uint16_t{}, [](std::uint16_t v) { return cpu::f16_to_float(v); });
      break;
    case DType::f64:
      argmax(double{}, [](double v) { return static_cast<float>(v); });
      break;
    default:
      argmax(float{}, [](float v) { return v; });
  }
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

std::vector<GradientBucket> TrainingStep::gradient_buckets(std::size_t bucket_bytes) const {
  const Impl& s = *impl_;
  const std::size_t size = dtype_size(s.policy.master);
  std::vector<ParameterGradient> params(s.params.size());
  std::map<std::size_t, std::size_t> by_offset;  // byte offset in the buffer -> parameter
  for (std::size_t p = 0; p < params.size(); ++p) {
    const std::int64_t end = p + 1 < params.size() ? s.params[p + 1].offset : s.param_total;
    params[p] = {s.params[p].offset, end - s.params[p].offset, -1};
    by_offset[static_cast<std::size_t>(s.params[p].offset) * size] = p;
  }
  // A gradient is final after the last backward op that writes it (a tied weight's is added to).
  for (std::size_t k = 0; k < s.backward.size(); ++k) {
    const Impl::Op& op = s.backward[k];
    for (std::size_t i = 0; i < op.slots.size(); ++i) {
      const Impl::Slot& slot = s.slots[s.root(op.slots[i])];
      if (slot.base == s.grads_slot && op.plan->operands()[i].is_output)
        params[by_offset.at(slot.base_offset)].ready_after = static_cast<int>(k);
    }
  }
  return plan_gradient_buckets(params, size, bucket_bytes);
}

Status TrainingStep::exchange_gradients(Communicator* communicator, const BucketOptions& options) {
  Impl& s = *impl_;
  s.exchange.reset();
  if (!communicator) return Status::Ok();
  if (communicator->size() != s.options.data_parallel_ranks)
    return Status::InvalidArgument(
        fmt::format("the step averages over {} ranks; the communicator has {}",
                    s.options.data_parallel_ranks, communicator->size()));
  s.exchange = std::make_unique<GradientExchange>(*communicator, s.slots[s.grads_slot].buffer,
                                                  s.policy.master,
                                                  gradient_buckets(options.bucket_bytes), options);
  return Status::Ok();
}

GradientExchange* TrainingStep::gradient_exchange() const {
  return impl_->exchange.get();
}

namespace {

// Checks the ops of one step as run_ops() hands them over, each against its f64 reference on
// the host (a GPU has no f64 ops) fed what the step's op read just before it ran.
class OpChecker {
 public:
  using Op = TrainingStep::Impl::Op;
  OpChecker(TrainingStep::Impl& step, const OpCheckOptions& options, OpCheck* out)
      : s_(step), options_(options), out_(out), host_(make_reference_backend()) {}

  Status check(Op& op) {
    const bool whole_parameters = op.phase == Phase::weight_cast || op.phase == Phase::optimizer;
    if (whole_parameters && flat_count(op.desc) > options_.full_update_limit)
      return check_by_tensors(op);
    if (const auto* cast = std::get_if<CastOp>(&op.desc)) return check_cast(op, *cast);
    const std::optional<OpDesc> reference = reference_op(op.desc);
    if (!reference) return s_.execute(op);
    const bool sampled = has_sampled_reference(op.desc) &&
                         reference_multiply_adds(op.desc) > options_.full_reference_limit;
    TB_RETURN_IF_ERROR(sampled ? check_sampled(op) : check_in_full(op, *reference));
    ++out_->ops_checked;
    return Status::Ok();
  }

 private:
  // One compared output: the step's values and the reference's, with the magnitudes a
  // product's cancellation is judged against (empty: not needed).
  struct Output {
    int index = 0;
    std::vector<double> got, want, magnitude, before;  // before: an in-place output's input
    double tolerance = 0;
  };

  // "layer1.0.conv1 conv diff_src", "optimizer weights", "weight cast dst".
  std::string output_name(const Op& op, int operand) const {
    const std::string& name = op.plan->operands()[operand].name;
    if (op.phase == Phase::optimizer) return fmt::format("{} {}", op_name(op.desc), name);
    if (op.phase == Phase::weight_cast) return fmt::format("weight cast {}", name);
    return fmt::format("{} {} {}", s_.network.layers()[op.layer].name, op_name(op.desc), name);
  }

  // The plain values of the step's operand `index` of `op` as it holds them now.
  Status step_values(const Op& op, int index, std::vector<double>* out) {
    const int slot = s_.root(op.slots[index]);
    const OperandSpec& spec = op.plan->operands()[index];
    if (s_.slots[slot].host) {  // host memory (hyper-parameters): plain bytes, read directly
      from_bytes(static_cast<const char*>(s_.slots[slot].buffer.data),
                 static_cast<std::size_t>(spec.elements()), spec.dtype, out);
      return Status::Ok();
    }
    return export_values(s_.backend, *op.plan, index, s_.slots[slot].buffer, out, &scratch_);
  }

  // What the op reads, by operand (outputs it does not read stay empty); the f64 forward's
  // masks and indices stand in for the step's opaque ones.
  Status read_inputs(const Op& op, std::vector<std::vector<double>>* inputs) {
    const std::vector<OperandSpec>& specs = op.plan->operands();
    inputs->resize(specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
      (*inputs)[i].clear();
      if (specs[i].is_output && !reads_output(op.desc, specs[i].name)) continue;
      if (opaque_operand(specs[i].name)) {
        const auto saved = reference_state_.find(s_.root(op.slots[i]));
        if (saved == reference_state_.end())
          return Status::Failed(
              fmt::format("{}: no reference to read", output_name(op, static_cast<int>(i))));
        (*inputs)[i] = saved->second;
        continue;
      }
      TB_RETURN_IF_ERROR(step_values(op, static_cast<int>(i), &(*inputs)[i]));
    }
    return Status::Ok();
  }

  // A fused ReLU's mask as the step decided it, from the step's own output: where rounding puts
  // a pre-activation on the other side of 0 than f64 does (3 of 6.4 million values in a
  // ResNet-50 step at batch 32), the f64 backward must route the gradient as the step did, or
  // each such value moves a channel's diff_beta by a gradient's size. The output itself is
  // checked against f64 like any other. Max pooling's indices stay the f64 forward's (`mask`
  // unchanged): the step reads the same input values, and ties break alike.
  Status step_decisions(const Op& op, int index, std::vector<double>* mask) {
    if (op.plan->operands()[index].name != "relu_mask") return Status::Ok();
    const std::vector<OperandSpec>& specs = op.plan->operands();
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].name != "dst") continue;
      std::vector<double>& dst = sampled_values_;
      TB_RETURN_IF_ERROR(step_values(op, static_cast<int>(i), &dst));
      for (std::size_t e = 0; e < dst.size(); ++e) (*mask)[e] = dst[e] > 0 ? 1 : 0;
      return Status::Ok();
    }
    return Status::Failed(fmt::format("{}: a ReLU mask without its output", s_.op_label(op)));
  }

  double tolerance_of(const Op& op, int index) const {
    // A TF32 product is held to TF32's rounding, whatever its output's storage.
    return op_tolerance(data_type(op.desc) == DType::tf32 ? DType::tf32
                                                          : op.plan->operands()[index].dtype);
  }

  // Entry `n` of outputs_ made ready for an output, its vectors' storage kept from earlier ops.
  Output& reuse_output(std::size_t n, int index, double tolerance) {
    if (outputs_.size() <= n) outputs_.resize(n + 1);
    Output& output = outputs_[n];
    output.index = index, output.tolerance = tolerance;
    for (std::vector<double>* values :
         {&output.got, &output.want, &output.magnitude, &output.before})
      values->clear();
    return output;
  }

  void judge(const Op& op, const Output& output) {
    double error = relative_l2_error(output.got, output.want), tolerance = output.tolerance;
    const double want_norm = l2_norm(output.want);
    if (!output.magnitude.empty()) {
      const double magnitude = l2_norm(output.magnitude);
      if (want_norm < kCancellation * magnitude) error = error * want_norm / magnitude;
    }
    if (!output.before.empty()) {
      // Updated in place (weights by the optimizer, gradients by the unscale): judged by the
      // change, with room for the storage rounding of the new value, which a small change
      // cannot resolve.
      std::vector<double> got_change(output.got.size()), want_change(output.want.size());
      for (std::size_t i = 0; i < output.want.size(); ++i) {
        got_change[i] = output.got[i] - output.before[i];
        want_change[i] = output.want[i] - output.before[i];
      }
      error = relative_l2_error(got_change, want_change);
      const DType stored = op.plan->operands()[output.index].dtype;
      tolerance += 2 * unit_roundoff(stored) * want_norm / std::max(l2_norm(want_change), 1e-300);
    }
    ++out_->outputs_compared;
    if (error / tolerance > out_->worst_error / std::max(out_->worst_tolerance, 1e-300) ||
        out_->outputs_compared == 1) {
      out_->worst_error = error;
      out_->worst_tolerance = tolerance;
      out_->worst_output = output_name(op, output.index);
    }
    if (!(error <= tolerance)) out_->passed = false;
  }

  // `values` rounded to nearest even in `dtype`: what a cast to it must produce exactly.
  static std::vector<double> rounded_to(const std::vector<double>& values, DType dtype) {
    const std::vector<char> bytes = to_bytes(values, dtype);
    return from_bytes(bytes.data(), values.size(), dtype);
  }

  // A cast rounds to nearest even: its output must be exactly its input so rounded.
  Status check_cast(Op& op, const CastOp& cast) {
    std::vector<std::vector<double>>& inputs = inputs_;
    TB_RETURN_IF_ERROR(read_inputs(op, &inputs));
    TB_RETURN_IF_ERROR(s_.execute(op));
    Output output{1, {}, rounded_to(inputs[0], cast.to), {}, {}, kExactTolerance};
    TB_RETURN_IF_ERROR(step_values(op, 1, &output.got));
    judge(op, output);
    ++out_->ops_checked;
    return Status::Ok();
  }

  // The count of an op over the flat parameter buffers (the weight cast, the unscale, the
  // optimizer), else 0.
  static std::int64_t flat_count(const OpDesc& desc) {
    if (const auto* o = std::get_if<OptimizerOp>(&desc)) return o->count;
    if (const auto* o = std::get_if<UnscaleGradientsOp>(&desc)) return o->count;
    if (const auto* o = std::get_if<CastOp>(&desc)) return o->count;
    return 0;
  }

  // The same op over one parameter tensor's `count` values (LAMB: as its only tensor).
  static OpDesc over_one_tensor(const OpDesc& desc, std::int64_t count) {
    return std::visit(
        [count](auto o) -> OpDesc {
          if constexpr (requires { o.count; }) o.count = count;
          if constexpr (requires { o.tensors; }) o.tensors = 1;
          return o;
        },
        desc);
  }

  // Seeded parameter tensors holding at least kUpdateSampleElements values between them.
  std::vector<int> sampled_parameters() const {
    std::vector<int> order(s_.network.parameters().size());
    for (std::size_t p = 0; p < order.size(); ++p) order[p] = static_cast<int>(p);
    std::sort(order.begin(), order.end(), [](int a, int b) {
      return mix64(static_cast<std::uint64_t>(a)) < mix64(static_cast<std::uint64_t>(b));
    });
    std::int64_t taken = 0;
    std::size_t n = 0;
    while (n < order.size() && taken < kUpdateSampleElements)
      taken += s_.network.parameters()[order[n++]].elements();
    order.resize(n);
    return order;
  }

  // Values [offset, offset + count) of the step's flat operand `index` of `op`.
  Status flat_values(const Op& op, int index, std::int64_t offset, std::int64_t count,
                     std::vector<double>* out) {
    const DType dtype = storage_dtype(op.plan->operands()[index].dtype);
    const Buffer whole = s_.slots[s_.root(op.slots[index])].buffer;
    const std::size_t size = dtype_size(dtype);
    const Buffer part{static_cast<char*>(whole.data) + static_cast<std::size_t>(offset) * size,
                      static_cast<std::size_t>(count) * size, whole.kind};
    scratch_.resize(part.bytes);
    TB_RETURN_IF_ERROR(s_.backend.download(part, scratch_.data(), part.bytes));
    from_bytes(scratch_.data(), static_cast<std::size_t>(count), dtype, out);
    return Status::Ok();
  }

  // An op over every parameter whose f64 copy would not fit comfortably (a full-size model's
  // weights, gradients and moments, each in double, before and after): checked on whole
  // sampled tensors (LAMB's trust ratio is per tensor), read before the step's op runs over
  // the whole buffer and after. Its found_nonfinite flag is not compared here (the reduced
  // networks' checks compare it).
  Status check_by_tensors(Op& op) {
    const std::vector<OperandSpec>& specs = op.plan->operands();
    const std::int64_t count = flat_count(op.desc);
    auto flat = [&](std::size_t i) {
      return specs[i].elements() == static_cast<std::size_t>(count);
    };
    struct Range {
      std::int64_t offset, length;
      std::vector<std::vector<double>> inputs;  // by operand, as the sub-op reads them
    };
    std::vector<Range> ranges;
    for (int p : sampled_parameters()) {
      Range range{s_.params[p].offset, s_.network.parameters()[p].elements(),
                  std::vector<std::vector<double>>(specs.size())};
      for (std::size_t i = 0; i < specs.size(); ++i) {
        const int index = static_cast<int>(i);
        std::vector<double>& values = range.inputs[i];
        if (specs[i].is_output && !reads_output(op.desc, specs[i].name)) continue;
        if (flat(i))
          TB_RETURN_IF_ERROR(flat_values(op, index, range.offset, range.length, &values));
        else if (specs[i].name == "tensor_offsets")
          values = {0.0, static_cast<double>(range.length)};
        else
          TB_RETURN_IF_ERROR(step_values(op, index, &values));  // hyper-parameters, the scale
      }
      ranges.push_back(std::move(range));
    }
    TB_RETURN_IF_ERROR(s_.execute(op));
    std::vector<int> compared;  // flat outputs, in operand order
    for (std::size_t i = 0; i < specs.size(); ++i)
      if (specs[i].is_output && flat(i)) compared.push_back(static_cast<int>(i));
    for (std::size_t n = 0; n < compared.size(); ++n)
      reuse_output(n, compared[n], tolerance_of(op, compared[n]));
    const auto* cast = std::get_if<CastOp>(&op.desc);
    std::vector<double> values;
    for (const Range& range : ranges) {
      const OpDesc part = over_one_tensor(op.desc, range.length);
      std::unique_ptr<Plan> plan;
      if (!cast) {
        TB_RETURN_IF_ERROR(host_->plan(*reference_op(part), &plan));
        TB_RETURN_IF_ERROR(pool_.fit(*plan));
        for (std::size_t i = 0; i < specs.size(); ++i)
          if (!specs[i].is_output || reads_output(op.desc, specs[i].name))
            TB_RETURN_IF_ERROR(import_values(*host_, *plan, static_cast<int>(i), range.inputs[i],
                                             pool_.operand[i]));
        TB_RETURN_IF_ERROR(host_->execute(*plan, pool_.operand, pool_.workspace));
      }
      for (std::size_t n = 0; n < compared.size(); ++n) {
        Output& output = outputs_[n];
        const int index = compared[n];
        if (cast) {
          values = rounded_to(range.inputs[0], cast->to);
        } else {
          TB_RETURN_IF_ERROR(
              export_values(*host_, *plan, index, pool_.operand[index], &values, &scratch_));
        }
        output.want.insert(output.want.end(), values.begin(), values.end());
        TB_RETURN_IF_ERROR(flat_values(op, index, range.offset, range.length, &values));
        output.got.insert(output.got.end(), values.begin(), values.end());
        if (updated_in_place(op.desc, specs[index].name))
          output.before.insert(output.before.end(), range.inputs[index].begin(),
                               range.inputs[index].end());
      }
    }
    for (std::size_t n = 0; n < compared.size(); ++n) {
      if (cast) outputs_[n].tolerance = kExactTolerance;
      judge(op, outputs_[n]);
    }
    ++out_->ops_checked;
    ++out_->ops_sampled;
    return Status::Ok();
  }

  // A product too large for its f64 loops: each output on sampled elements, one dot product
  // each, from the inputs the step's op read.
  Status check_sampled(Op& op) {
    std::vector<std::vector<double>>& inputs = inputs_;
    TB_RETURN_IF_ERROR(read_inputs(op, &inputs));
    TB_RETURN_IF_ERROR(s_.execute(op));
    const std::vector<OperandSpec>& specs = op.plan->operands();
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (!specs[i].is_output) continue;
      const SampledOutput want = sample_reference(op.desc, static_cast<int>(i), inputs,
                                                  options_.samples, mix64(++sample_stream_));
      std::vector<double>& all = sampled_values_;
      TB_RETURN_IF_ERROR(step_values(op, static_cast<int>(i), &all));
      Output output{static_cast<int>(i), {}, want.value,
                    want.magnitude,      {}, tolerance_of(op, static_cast<int>(i))};
      for (std::int64_t index : want.index) output.got.push_back(all.at(index));
      judge(op, output);
    }
    ++out_->ops_sampled;
    return Status::Ok();
  }

  Status check_in_full(Op& op, const OpDesc& reference) {
    std::unique_ptr<Plan> plan;
    TB_RETURN_IF_ERROR(host_->plan(reference, &plan));
    HostPool& buffers = pool_;
    TB_RETURN_IF_ERROR(buffers.fit(*plan));
    std::vector<std::vector<double>>& inputs = inputs_;
    TB_RETURN_IF_ERROR(read_inputs(op, &inputs));
    const std::vector<OperandSpec>& specs = plan->operands();
    for (std::size_t i = 0; i < specs.size(); ++i)
      if (!specs[i].is_output || reads_output(op.desc, specs[i].name))
        TB_RETURN_IF_ERROR(
            import_values(*host_, *plan, static_cast<int>(i), inputs[i], buffers.operand[i]));
    TB_RETURN_IF_ERROR(s_.execute(op));
    TB_RETURN_IF_ERROR(host_->execute(*plan, buffers.operand, buffers.workspace));
    std::span<Output> outputs;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (!specs[i].is_output || statistics_operand(specs[i].name)) continue;
      const int index = static_cast<int>(i);
      Output& output = reuse_output(outputs.size(), index, tolerance_of(op, index));
      TB_RETURN_IF_ERROR(
          export_values(*host_, *plan, index, buffers.operand[i], &output.want, &scratch_));
      if (opaque_operand(specs[i].name)) {
        TB_RETURN_IF_ERROR(step_decisions(op, index, &output.want));
        reference_state_[s_.root(op.slots[i])] = std::move(output.want);
        continue;
      }
      TB_RETURN_IF_ERROR(step_values(op, index, &output.got));
      if (specs[i].dtype == DType::i32) output.tolerance = kExactTolerance;  // a flag or index
      if (updated_in_place(op.desc, specs[i].name)) output.before = inputs[i];
      output.magnitude = reduction_magnitude(op.desc, specs, inputs, index);
      outputs = std::span<Output>(outputs_.data(), outputs.size() + 1);
    }
    // A product whose output cancels (a bias gradient whose exact value is 0: attention's key
    // bias) has no meaningful relative error: it is held to the forward error bound of a sum
    // instead, relative to the same product of the inputs' absolute values.
    const bool any_off = std::any_of(outputs.begin(), outputs.end(), [](const Output& o) {
      return !(relative_l2_error(o.got, o.want) <= o.tolerance);
    });
    if (any_off && is_product(op.desc)) {
      for (std::size_t i = 0; i < specs.size(); ++i) {
        if (specs[i].is_output) continue;
        for (double& v : inputs[i]) v = std::fabs(v);
        TB_RETURN_IF_ERROR(
            import_values(*host_, *plan, static_cast<int>(i), inputs[i], buffers.operand[i]));
      }
      TB_RETURN_IF_ERROR(host_->execute(*plan, buffers.operand, buffers.workspace));
      for (Output& output : outputs)
        TB_RETURN_IF_ERROR(export_values(*host_, *plan, output.index, buffers.operand[output.index],
                                         &output.magnitude, &scratch_));
    }
    for (const Output& output : outputs) judge(op, output);
    return Status::Ok();
  }

  // The reference plans' operands and workspace in host memory, kept from op to op and grown
  // when an op needs more: a full-size step's f64 operands are hundreds of MB, and memory freshly
  // mapped for every op costs more in first-touch page faults than the reference computes.
  struct HostPool {
    explicit HostPool(Backend& backend) : backend(backend) {}
    ~HostPool() {
      for (Buffer buffer : owned)
        if (buffer.data) backend.release(buffer);
    }
    // Operand i of `plan` in operand[i], the workspace in workspace; outputs zeroed.
    Status fit(const Plan& plan) {
      const std::vector<OperandSpec>& specs = plan.operands();
      owned.resize(std::max(owned.size(), specs.size() + 1));
      operand.assign(specs.size(), {});
      for (std::size_t i = 0; i <= specs.size(); ++i) {
        const std::size_t bytes =
            std::max<std::size_t>(i < specs.size() ? specs[i].bytes : plan.workspace_bytes(), 1);
        if (owned[i].bytes < bytes) {
          if (owned[i].data) backend.release(owned[i]);
          owned[i] = {};
          TB_RETURN_IF_ERROR(backend.allocate(bytes, &owned[i]));
        }
        const Buffer view{owned[i].data, bytes};
        if (i == specs.size()) {
          workspace = plan.workspace_bytes() > 0 ? view : Buffer{};
        } else {
          operand[i] = view;
          if (specs[i].is_output) std::memset(view.data, 0, bytes);  // as freshly allocated
        }
      }
      return Status::Ok();
    }
    Backend& backend;
    std::vector<Buffer> owned;  // by operand, the workspace last
    std::vector<Buffer> operand;
    Buffer workspace;
  };

  TrainingStep::Impl& s_;
  const OpCheckOptions& options_;
  OpCheck* out_;
  std::unique_ptr<Backend> host_;
  HostPool pool_{*host_};
  std::vector<std::vector<double>> inputs_;  // by operand; their storage kept between ops
  std::vector<char> scratch_;                // raw bytes of an export, likewise
  std::vector<Output> outputs_;              // an op's compared outputs, likewise
  std::vector<double> sampled_values_;       // a sampled output, a ReLU's output, likewise
  std::map<int, std::vector<double>> reference_state_;  // masks and indices the f64 forward made
  std::uint64_t sample_stream_ = 0;                     // a fresh sample per output
};

}  // namespace

Status TrainingStep::check_ops(OpCheck* out, const OpCheckOptions& options) {
  *out = {};
  out->passed = true;
  OpChecker checker(*impl_, options, out);
  return run_ops(options.update.has_value(), options.update.value_or(OptimizerSettings{}),
                 [&](Impl::Op& op) { return checker.check(op); });
}

std::uint64_t TrainingStep::memory_bytes() const {
  return impl_->arena.bytes + impl_->workspace.bytes;
}

std::uint64_t TrainingStep::optimizer_state_bytes() const {
  std::uint64_t bytes = 0;
  for (int slot : impl_->optimizer_state_slots) bytes += impl_->slots[slot].bytes;
  if (impl_->tensor_offsets_slot >= 0) bytes += impl_->slots[impl_->tensor_offsets_slot].bytes;
  return bytes;
}

std::vector<std::string> TrainingStep::implementations() const {
  std::map<std::string, int> counts;
  for (const std::vector<Impl::Op>* list : {&impl_->weight_cast, &impl_->forward, &impl_->backward})
    for (const Impl::Op& op : *list) ++counts[op.plan->implementation()];
  if (impl_->optimizer.plan) ++counts[impl_->optimizer.plan->implementation()];
  std::vector<std::string> lines;
  for (const auto& [name, count] : counts) lines.push_back(fmt::format("{} x{}", name, count));
  return lines;
}

std::vector<ReferenceOp> TrainingStep::reference_ops() const {
  std::vector<ReferenceOp> ops;
  impl_->for_each_op([&](const Impl::Op& op) {
    if (op.plan->is_reference())
      ops.push_back({impl_->op_label(op), op.plan->implementation(), 0.0});
  });
  return ops;
}

bool TrainingStep::emulates_bf16() const {
  bool emulated = false;
  impl_->for_each_op([&](const Impl::Op& op) { emulated = emulated || op.plan->emulates_bf16(); });
  return emulated;
}

std::uint64_t estimate_training_bytes(const Network& network, const StepOptions& options) {
  // Each activation is kept for backward and has a gradient, and the tensors read twice have a
  // partial gradient: 2.25 copies of every tensor in the compute dtype, calibrated on the
  // planned ResNet-50 step (fp32 batch 32: 8.25 GB planned, 8.40 GB estimated; batch 85:
  // 21.38 and 21.80 GB). Parameters, gradients and the optimizer's state (one or two values
  // per parameter) stay in the master dtype.
  constexpr double kCopiesPerTensor = 2.25;
  const PrecisionPolicy policy = PrecisionPolicy::for_compute(options.dtype);
  const double per_parameter = options.optimizer == OptimizerKind::sgd_momentum ? 3.0 : 4.0;
  double bytes = 0;
  for (const TensorShape& tensor : network.tensors())
    bytes += kCopiesPerTensor * static_cast<double>(tensor.elements()) * dtype_size(policy.compute);
  bytes +=
      per_parameter * static_cast<double>(network.parameter_count()) * dtype_size(policy.master);
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace tb
