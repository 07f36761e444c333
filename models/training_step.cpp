// Running a lowered step (lowering.cpp builds it): its batch, parameters and state in and out,
// the step itself in run_ops()'s order, and the op-by-op check (op_check.cpp) on that order.
#include "models/training_step.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>

#include <fmt/format.h>

#include "models/host_values.h"
#include "models/op_check.h"
#include "models/training_step_impl.h"

#include "backends/low_precision.h"
#include "backends/numeric.h"
#include "backends/seeded.h"

namespace tb {
namespace {

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

}  // namespace

Status export_values(Backend& backend, const Plan& plan, int index, Buffer buffer,
                     std::vector<double>* out, std::vector<char>* scratch) {
  const OperandSpec& spec = plan.operands()[index];
  std::vector<char> local;
  std::vector<char>& bytes = scratch ? *scratch : local;
  bytes.resize(spec.elements() * dtype_size(spec.dtype));
  TB_RETURN_IF_ERROR(backend.export_operand(plan, index, buffer, bytes.data()));
  from_bytes(bytes.data(), spec.elements(), spec.dtype, out);
  return Status::Ok();
}

TrainingStep::Impl::Impl(Backend& b, const Network& n, const StepOptions& step_options)
    : backend(b),
      network(n),
      policy(PrecisionPolicy::for_compute(step_options.dtype)),
      channel_dtype(step_options.dtype == DType::f64 ? step_options.dtype : DType::f32),
      options(step_options),
      memory(b) {
  const bool scaled =
      options.loss_scaling == LossScaling::dynamic ||
      (options.loss_scaling == LossScaling::by_precision && policy.needs_loss_scaling());
  if (scaled && !options.evaluation) scaler = DynamicLossScale{options.initial_loss_scale};
}

TrainingStep::Impl::~Impl() {
  if (workspace.data) backend.release(workspace);
}

std::vector<TrainingStep::Impl::StateEntry> TrainingStep::Impl::state_entries() const {
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

NamedTensor TrainingStep::Impl::parameter_tensor(const std::vector<char>& flat, int p) const {
  const Parameter& parameter = network.parameters()[p];
  return {parameter.name, parameter.dims,
          from_bytes(flat.data() + parameter_offsets[p] * dtype_size(policy.master),
                     static_cast<std::size_t>(parameter.elements()), policy.master)};
}

std::string StepView::op_label(const StepOp& op) const {
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

Status TrainingStep::Impl::write_loss_scale() {
  if (loss_scale_slot < 0) return Status::Ok();
  const double dynamic = scaler ? scaler->scale : 1.0;
  const float scale = static_cast<float>(dynamic / options.data_parallel_ranks),
              inverse = static_cast<float>(1.0 / dynamic);
  TB_RETURN_IF_ERROR(backend.upload(&scale, memory[loss_scale_slot].buffer, sizeof(scale)));
  if (inverse_scale_slot < 0) return Status::Ok();
  return backend.upload(&inverse, memory[inverse_scale_slot].buffer, sizeof(inverse));
}

Status TrainingStep::Impl::set_dropout_step(std::int64_t step) {
  if (dropout_step_slot < 0) return Status::Ok();
  const auto value = static_cast<std::int32_t>(step);
  return backend.upload(&value, memory[dropout_step_slot].buffer, sizeof(value));
}

namespace {

// The memory of each of `op`'s operands, once the step's memory is allocated.
void resolve(const StepMemory& memory, StepOp& op) {
  op.buffers.clear();
  for (int slot : op.slots) op.buffers.push_back(memory.buffer(slot));
}

}  // namespace

Status TrainingStep::Impl::allocate() {
  TB_RETURN_IF_ERROR(memory.allocate());
  if (workspace_bytes > 0) TB_RETURN_IF_ERROR(backend.allocate(workspace_bytes, &workspace));
  for (std::vector<Op>* list : {&weight_cast, &forward, &backward})
    for (Op& op : *list) resolve(memory, op);
  resolve(memory, optimizer);
  if (unscale) resolve(memory, *unscale);
  TB_RETURN_IF_ERROR(write_loss_scale());
  if (tensor_offsets_slot >= 0) {
    std::vector<std::int32_t> offsets;
    for (std::int64_t offset : parameter_offsets)
      offsets.push_back(static_cast<std::int32_t>(offset));
    offsets.push_back(static_cast<std::int32_t>(param_total));
    TB_RETURN_IF_ERROR(backend.upload(offsets.data(), memory[tensor_offsets_slot].buffer,
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
                           dtype_name(d)))
        .because(ReasonCode::dtype_unsupported);
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
  *out = plan.memory.lay_out(false) + plan.workspace_bytes;
  return Status::Ok();
}

Status TrainingStep::planned_check_bytes(Backend& backend, const Network& network,
                                         const StepOptions& options, const OpCheckOptions& check,
                                         std::uint64_t* out) {
  Impl plan(backend, network, options);
  TB_RETURN_IF_ERROR(plan.build());
  OpCheckFootprint footprint(plan.view(), check);
  Status status = Status::Ok();
  plan.for_each_op([&](const Impl::Op& op) {
    if (status.ok()) status = footprint.add(op);
  });
  TB_RETURN_IF_ERROR(status);
  *out = footprint.bytes();
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
                                                s.memory.buffer(s.value[input.tensor])));
  }
  return Status::Ok();
}

namespace {

// Parameter `parameter`'s value `i` in the seeded stream `stream`.
double initial_value(const Parameter& parameter, std::uint64_t stream, std::int64_t i) {
  switch (parameter.init) {
    case ParamInit::kaiming_normal_fan_out:
      return normal(stream, i) * std::sqrt(2.0 / static_cast<double>(parameter.fan_out));
    case ParamInit::linear_uniform:
      return uniform(stream, i) / std::sqrt(static_cast<double>(parameter.fan_in));
    case ParamInit::normal_0_02:
      return 0.02 * normal(stream, i);
    case ParamInit::ones:
      return 1.0;
    case ParamInit::zeros:
      break;
  }
  return 0.0;
}

// Values generated, converted and uploaded this many at a time: a whole f64 copy of BERT-base's
// 110 million parameters took 880 MB and, single-threaded, 11 s of a case's set-up here.
constexpr std::int64_t kInitializeChunk = std::int64_t{1} << 20;

// `bytes` of zeros into `buffer`, from one chunk-sized host block.
Status upload_zeros(Backend& backend, Buffer buffer, std::size_t bytes) {
  const std::vector<char> zeros(std::min<std::size_t>(bytes, kInitializeChunk * sizeof(double)));
  for (std::size_t done = 0; done < bytes; done += zeros.size()) {
    const Buffer part = slice(buffer, done, std::min(zeros.size(), bytes - done));
    TB_RETURN_IF_ERROR(backend.upload(zeros.data(), part, part.bytes));
  }
  return Status::Ok();
}

}  // namespace

Status TrainingStep::initialize_parameters(std::uint64_t seed) {
  Impl& s = *impl_;
  const std::size_t master_size = dtype_size(s.policy.master);
  const std::size_t flat_bytes = static_cast<std::size_t>(s.param_total) * master_size;
  const Buffer params = s.memory[s.params_slot].buffer;
  TB_RETURN_IF_ERROR(upload_zeros(s.backend, params, flat_bytes));  // the padding between tensors
  TB_RETURN_IF_ERROR(upload_zeros(s.backend, s.memory[s.grads_slot].buffer, flat_bytes));
  for (int slot : s.optimizer_state_slots)
    TB_RETURN_IF_ERROR(upload_zeros(s.backend, s.memory[slot].buffer, flat_bytes));
  std::vector<double> values;
  std::vector<char> bytes;
  const std::vector<Parameter>& parameters = s.network.parameters();
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    const Parameter& parameter = parameters[p];
    const std::uint64_t stream = mix64(seed + p);
    for (std::int64_t first = 0; first < parameter.elements(); first += kInitializeChunk) {
      const std::int64_t count = std::min(kInitializeChunk, parameter.elements() - first);
      values.resize(static_cast<std::size_t>(count));
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < count; ++i)
        values[static_cast<std::size_t>(i)] = initial_value(parameter, stream, first + i);
      to_bytes(values, s.policy.master, &bytes);
      const std::size_t offset =
          static_cast<std::size_t>(s.parameter_offsets[p] + first) * master_size;
      TB_RETURN_IF_ERROR(
          s.backend.upload(bytes.data(), slice(params, offset, bytes.size()), bytes.size()));
    }
  }
  for (const auto& [mean, variance] : s.running) {
    if (mean < 0) continue;
    const std::size_t count = s.memory[mean].bytes / dtype_size(s.channel_dtype);
    const std::vector<char> zero = to_bytes(std::vector<double>(count, 0.0), s.channel_dtype),
                            one = to_bytes(std::vector<double>(count, 1.0), s.channel_dtype);
    TB_RETURN_IF_ERROR(s.backend.upload(zero.data(), s.memory[mean].buffer, zero.size()));
    TB_RETURN_IF_ERROR(s.backend.upload(one.data(), s.memory[variance].buffer, one.size()));
  }
  if (s.scaler) s.scaler = DynamicLossScale{s.options.initial_loss_scale};
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
        s.backend.download(s.memory[s.nonfinite_slot].buffer, &nonfinite, sizeof(nonfinite)));
    apply = s.scaler->update(nonfinite != 0);
    TB_RETURN_IF_ERROR(s.write_loss_scale());
  }
  if (apply) {
    std::vector<float> hyper = {settings.learning_rate, settings.momentum, settings.weight_decay};
    if (s.options.optimizer != OptimizerKind::sgd_momentum)
      hyper = {settings.learning_rate, settings.beta1,        settings.beta2,
               settings.epsilon,       settings.weight_decay, static_cast<float>(steps_taken_ + 1)};
    TB_RETURN_IF_ERROR(s.backend.upload(hyper.data(), s.memory[s.hyper_slot].buffer,
                                        hyper.size() * sizeof(float)));
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
      breakdown->layers.push_back({layer.name, layer_kind_name(layer.kind), 0, 0, {}, 0, 0});
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
    if (const double flops = product_flops(op.desc);
        flops > 0 && (op.phase == Phase::forward || op.phase == Phase::backward)) {
      breakdown->layers[op.layer].product_flops += flops;
      breakdown->layers[op.layer].product_s += seconds;
    }
    if (op.phase == Phase::optimizer) breakdown->optimizer_s += seconds;
    if (op.phase == Phase::weight_cast) breakdown->weight_cast_s += seconds;
    if (op.plan->is_reference())
      breakdown->reference_ops.push_back(
          {s.view().op_label(op), op.plan->implementation(), seconds});
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
    TB_RETURN_IF_ERROR(s.backend.download(s.memory.buffer(slot), bytes.data(), bytes.size()));
    *out += from_bytes(bytes.data(), 1, s.policy.head)[0];
  }
  return Status::Ok();
}

Status TrainingStep::Impl::find_output(const std::string& name, const Op** op_out,
                                       int* operand) const {
  const std::vector<Layer>& layers = network.layers();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].name != name) continue;
    const int slot = memory.root(value[layers[l].output]);
    for (const Op& op : forward)
      for (std::size_t i = 0; i < op.slots.size(); ++i)
        if (op.layer == static_cast<int>(l) && memory.root(op.slots[i]) == slot &&
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
  return export_values(s.backend, *op->plan, operand, s.memory.buffer(op->slots[operand]), out,
                       &s.export_scratch);
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
      *op->plan, operand, s.memory.buffer(op->slots[operand]), s.export_scratch.data()));
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
                flat.begin() + s.parameter_offsets[entry.parameter]);
    } else if (entry.running_slot >= 0) {
      const std::vector<char> values = to_bytes(tensor.values, s.channel_dtype);
      TB_RETURN_IF_ERROR(
          s.backend.upload(values.data(), s.memory[entry.running_slot].buffer, values.size()));
    }
  }
  const std::vector<char> bytes = to_bytes(flat, s.policy.master);
  return s.backend.upload(bytes.data(), s.memory[s.params_slot].buffer, bytes.size());
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
  const std::vector<std::int64_t>& offsets = s.parameter_offsets;
  std::vector<ParameterGradient> params(offsets.size());
  std::map<std::size_t, std::size_t> by_offset;  // byte offset in the buffer -> parameter
  for (std::size_t p = 0; p < params.size(); ++p) {
    const std::int64_t end = p + 1 < params.size() ? offsets[p + 1] : s.param_total;
    params[p] = {offsets[p], end - offsets[p], -1};
    by_offset[static_cast<std::size_t>(offsets[p]) * size] = p;
  }
  // A gradient is final after the last backward op that writes it (a tied weight's is added to).
  for (std::size_t k = 0; k < s.backward.size(); ++k) {
    const Impl::Op& op = s.backward[k];
    for (std::size_t i = 0; i < op.slots.size(); ++i) {
      const StepMemory::Slot& slot = s.memory[s.memory.root(op.slots[i])];
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
  s.exchange = std::make_unique<GradientExchange>(*communicator, s.memory[s.grads_slot].buffer,
                                                  s.policy.master,
                                                  gradient_buckets(options.bucket_bytes), options);
  return Status::Ok();
}

GradientExchange* TrainingStep::gradient_exchange() const {
  return impl_->exchange.get();
}

Status TrainingStep::check_ops(OpCheck* out, const OpCheckOptions& options) {
  *out = {};
  out->passed = true;
  const StepView view = impl_->view();
  OpChecker checker(view, options, out);
  return run_ops(options.update.has_value(), options.update.value_or(OptimizerSettings{}),
                 [&](const Impl::Op& op) { return checker.check(op); });
}

std::uint64_t TrainingStep::memory_bytes() const {
  return impl_->memory.arena_bytes() + impl_->workspace.bytes;
}

std::uint64_t TrainingStep::optimizer_state_bytes() const {
  std::uint64_t bytes = 0;
  for (int slot : impl_->optimizer_state_slots) bytes += impl_->memory[slot].bytes;
  if (impl_->tensor_offsets_slot >= 0) bytes += impl_->memory[impl_->tensor_offsets_slot].bytes;
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
      ops.push_back({impl_->view().op_label(op), op.plan->implementation(), 0.0});
  });
  return ops;
}

bool TrainingStep::emulates_bf16() const {
  bool emulated = false;
  impl_->for_each_op([&](const Impl::Op& op) { emulated = emulated || op.plan->emulates_bf16(); });
  return emulated;
}

std::vector<LayerProductOp> TrainingStep::product_ops() const {
  std::vector<LayerProductOp> ops;
  for (const std::vector<Impl::Op>* list : {&impl_->forward, &impl_->backward})
    for (const Impl::Op& op : *list)
      if (product_flops(op.desc) > 0) ops.push_back({op.layer, op.desc});
  return ops;
}

}  // namespace tb
