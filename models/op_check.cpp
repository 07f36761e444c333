// The op-by-op check (TrainingStep::check_ops): every op of one step against the same op in
// f64 on the host, fed what the step's op read, through a read-only view of the step.
#include "models/op_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <span>

#include <fmt/format.h>
#include <omp.h>

#include "backends/numeric.h"
#include "backends/operands.h"
#include "backends/registry.h"
#include "backends/seeded.h"
#include "models/host_values.h"
#include "models/sampled_reference.h"

namespace tb {

void OpCheck::add_output(double error, double tolerance, const std::string& output) {
  auto excess = [](double e, double t) {
    return std::isnan(e) || std::isnan(t) ? INFINITY : e / std::max(t, 1e-300);
  };
  if (++outputs_compared == 1 || excess(error, tolerance) > excess(worst_error, worst_tolerance)) {
    worst_error = error;
    worst_tolerance = tolerance;
    worst_output = output;
  }
}

namespace {

// `scratch` holds the bytes, its storage kept from call to call (see HostPool).
Status import_values(Backend& backend, const Plan& plan, int index,
                     const std::vector<double>& values, Buffer buffer, std::vector<char>* scratch) {
  to_bytes(values, plan.operands()[index].dtype, scratch);
  return backend.import_operand(plan, index, scratch->data(), buffer);
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
bool opaque_operand(const OperandSpec& spec) {
  return spec.role == OperandRole::workspace;
}
// Running statistics, updated in place by a momentum too small to judge within one step:
// never compared.
bool statistics_operand(const OperandSpec& spec) {
  return spec.role == OperandRole::running_statistic;
}
// Values an op updates in place: the optimizer's weights and state, the unscaled gradients.
bool updated_in_place(const OperandSpec& spec) {
  return spec.role == OperandRole::updated_in_place;
}

// An op over every parameter, checked on sampled tensors where the model is large
// (OpCheckOptions::full_update_limit): at least this many values (a few tensors).
constexpr std::int64_t kUpdateSampleElements = std::int64_t{1} << 20;
constexpr std::int64_t kUpdateSampleTensorLimit = std::int64_t{1} << 22;

// Seeded parameter tensors holding at least kUpdateSampleElements values between them, none
// over kUpdateSampleTensorLimit where another can be taken: a vocabulary's embedding (BERT's
// 23 million values) would cost more in f64 copies than the rest of the check. The op runs
// the same code over every tensor of the flat buffer, and the reduced network checks them all.
std::vector<int> sampled_parameters(const Network& network) {
  const std::vector<Parameter>& parameters = network.parameters();
  std::vector<int> order(parameters.size());
  for (std::size_t p = 0; p < order.size(); ++p) order[p] = static_cast<int>(p);
  std::sort(order.begin(), order.end(), [](int a, int b) {
    return mix64(static_cast<std::uint64_t>(a)) < mix64(static_cast<std::uint64_t>(b));
  });
  std::stable_partition(order.begin(), order.end(), [&](int p) {
    return static_cast<std::int64_t>(parameters[p].elements()) <= kUpdateSampleTensorLimit;
  });
  std::int64_t taken = 0;
  std::size_t n = 0;
  while (n < order.size() && taken < kUpdateSampleElements)
    taken += static_cast<std::int64_t>(parameters[order[n++]].elements());
  order.resize(n);
  return order;
}

// Adds add(e, sum) for every element e < elements into (*sums)[group(e)], on every thread:
// each thread sums into its own copy, and the copies are added in thread order (the same
// result for the same thread count). Sum needs += .
template <typename Sum, typename Add>
void sum_by_group(std::int64_t elements, const std::function<std::int64_t(std::int64_t)>& group,
                  const Add& add, std::vector<Sum>* sums) {
  const bool parallel = elements > (std::int64_t{1} << 16);
  std::vector<std::vector<Sum>> partial(parallel ? omp_get_max_threads() : 1,
                                        std::vector<Sum>(sums->size()));
#pragma omp parallel if (parallel)
  {
    std::vector<Sum>& mine = partial[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
    for (std::int64_t e = 0; e < elements; ++e) add(e, mine[group(e)]);
  }
  for (const std::vector<Sum>& part : partial)
    for (std::size_t k = 0; k < sums->size(); ++k) (*sums)[k] += part[k];
}

// A normalization's diff_src = gamma / sigma * (dy - mean(dy) - xhat * mean(dy xhat)), the
// means over each element's statistic group: with few elements per group it cancels (two per
// channel, as a batch norm at batch 2 on a 1x1 map has, leave |xhat| = 1 - epsilon / 2 var and
// a gradient of 1e-5 of its terms). The l2 norm of its terms' absolute values, element by element.
double backward_data_magnitude(const std::vector<double>& src, const std::vector<double>& dy,
                               const std::vector<double>* mask, const std::vector<double>& mean,
                               const std::vector<double>& variance,
                               const std::vector<double>& gamma, std::int64_t elements,
                               float epsilon,
                               const std::function<std::int64_t(std::int64_t)>& parameter,
                               const std::function<std::int64_t(std::int64_t)>& statistic) {
  struct GroupSums {  // of one statistic's group: |dy|, |dy xhat| and its element count
    double dy = 0, dy_xhat = 0, count = 0;
    GroupSums& operator+=(const GroupSums& other) {
      dy += other.dy, dy_xhat += other.dy_xhat, count += other.count;
      return *this;
    }
  };
  std::vector<GroupSums> sums(mean.size());
  auto xhat = [&](std::int64_t e) {
    const std::int64_t k = statistic(e);
    return (src[e] - mean[k]) / std::sqrt(variance[k] + epsilon);
  };
  auto gradient = [&](std::int64_t e) { return mask && (*mask)[e] == 0 ? 0.0 : dy[e]; };
  sum_by_group(
      elements, statistic,
      [&](std::int64_t e, GroupSums& group) {
        group.dy += std::fabs(gradient(e));
        group.dy_xhat += std::fabs(gradient(e) * xhat(e));
        group.count += 1;
      },
      &sums);
  double sum_of_squares = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum_of_squares) if (elements > (1 << 16))
  for (std::int64_t e = 0; e < elements; ++e) {
    const std::int64_t k = statistic(e);
    const GroupSums& group = sums[k];
    const double term = std::fabs(gamma[parameter(e)]) / std::sqrt(variance[k] + epsilon) *
                        (std::fabs(gradient(e)) + group.dy / group.count +
                         std::fabs(xhat(e)) * group.dy_xhat / group.count);
    sum_of_squares += term * term;
  }
  return std::sqrt(sum_of_squares);
}

// What a normalization's output is judged against where it cancels: the sums of absolute terms
// behind its reductions (only their norm is used) and, for a data gradient, the fraction of
// that norm that the rounding of its terms may leave (0 for the others).
struct ReductionMagnitude {
  std::vector<double> sums;
  double rounding = 0;
};

// Each term of a data gradient is rounded a few times in fp32 (every kernel's arithmetic for
// normalizations) and its group's means sum as many as the group holds: 16 u sqrt(n) of the
// terms' norm. A wrong gradient (zero, negated, scaled) is caught down to that size, however
// far the terms cancel.
constexpr double kDataGradientRoundings = 16;

// The sums of absolute terms behind a normalization's reductions, by group: batch norm's per
// channel (forward mean: |x| averaged; backward diff_beta: |dy|, diff_gamma: |dy xhat|), layer
// norm's forward mean per row and backward parameter gradients per column. Such a sum cancels
// as a product's can: the stem's diff_beta of a ResNet-50 step at batch 32 sums 401,408 terms
// to 2e-4 of their magnitude, and fp32 leaves 6e-5 relative error there. Empty for other
// outputs; for diff_src, one value: the norm of backward_data_magnitude's terms, with its
// rounding. `in` holds the op's plain inputs by operand.
ReductionMagnitude reduction_magnitude(const OpDesc& desc, const std::vector<OperandSpec>& specs,
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
        *mask = operand("relu_mask"), *mean = operand("mean"), *variance = operand("variance"),
        *gamma = operand("gamma");
  const bool forward_mean = name == "mean" && src && !dy;
  const bool backward =
      (name == "diff_beta" || name == "diff_gamma") && src && dy && mean && variance;
  if (name == "diff_src" && src && dy && mean && variance && gamma) {
    const double group_size = static_cast<double>(elements) / static_cast<double>(mean->size());
    return {{backward_data_magnitude(*src, *dy, mask, *mean, *variance, *gamma, elements, epsilon,
                                     group, statistic)},
            kDataGradientRoundings * unit_roundoff(DType::f32) * std::sqrt(group_size)};
  }
  if (!forward_mean && !backward) return {};
  std::vector<double> magnitude(static_cast<std::size_t>(groups), 0.0);
  const bool diff_gamma = name == "diff_gamma";
  sum_by_group(
      elements, group,
      [&](std::int64_t e, double& sum) {
        double term = forward_mean ? (*src)[e] : (mask && (*mask)[e] == 0 ? 0.0 : (*dy)[e]);
        if (diff_gamma) {
          const std::int64_t k = statistic(e);
          term *= ((*src)[e] - (*mean)[k]) / std::sqrt((*variance)[k] + epsilon);
        }
        sum += std::fabs(term);
      },
      &magnitude);
  if (forward_mean)
    for (double& m : magnitude) m /= static_cast<double>(elements / groups);
  return {magnitude};
}

// The count of an op over the flat parameter buffers (the weight cast, the unscale, the
// optimizer), else 0.
std::int64_t flat_count(const OpDesc& desc) {
  if (const auto* o = std::get_if<OptimizerOp>(&desc)) return o->count;
  if (const auto* o = std::get_if<UnscaleGradientsOp>(&desc)) return o->count;
  if (const auto* o = std::get_if<CastOp>(&desc)) return o->count;
  return 0;
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

CheckPath check_path(const StepOp& op, const OpCheckOptions& options) {
  if (options.products_only && product_flops(op.desc) <= 0) return CheckPath::unchecked;
  const bool whole_parameters = op.phase == Phase::weight_cast || op.phase == Phase::optimizer;
  if (whole_parameters && flat_count(op.desc) > options.full_update_limit)
    return CheckPath::by_tensors;
  if (std::holds_alternative<CastOp>(op.desc)) return CheckPath::cast;
  if (!reference_op(op.desc)) return CheckPath::unchecked;
  if (has_sampled_reference(op.desc) && multiply_adds(op.desc) > options.full_reference_limit)
    return CheckPath::sampled;
  return CheckPath::in_full;
}

// Checks the ops of one step as run_ops() hands them over, each against its f64 reference on
// the host (a GPU has no f64 ops) fed what the step's op read just before it ran.
class OpChecker::Checker {
 public:
  using Op = StepOp;
  Checker(const StepView& step, const OpCheckOptions& options, OpCheck* out)
      : s_(step), options_(options), out_(out), host_(make_reference_backend()) {}

  Status check(const Op& op) {
    switch (check_path(op, options_)) {
      case CheckPath::by_tensors:
        return check_by_tensors(op);
      case CheckPath::cast:
        return check_cast(op, std::get<CastOp>(op.desc));
      case CheckPath::unchecked:
        return s_.execute(op);
      case CheckPath::sampled:
        TB_RETURN_IF_ERROR(check_sampled(op));
        break;
      case CheckPath::in_full:
        TB_RETURN_IF_ERROR(check_in_full(op, *reference_op(op.desc)));
        break;
    }
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
    double magnitude_rounding = 0;  // ReductionMagnitude::rounding
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
    const int slot = s_.memory.root(op.slots[index]);
    const OperandSpec& spec = op.plan->operands()[index];
    if (s_.memory[slot].host) {  // host memory (hyper-parameters): plain bytes, read directly
      from_bytes(static_cast<const char*>(s_.memory[slot].buffer.data),
                 static_cast<std::size_t>(spec.elements()), spec.dtype, out);
      return Status::Ok();
    }
    return export_values(s_.backend, *op.plan, index, s_.memory[slot].buffer, out, &scratch_);
  }

  // What the op reads, by operand (outputs it does not read stay empty); the f64 forward's
  // masks and indices stand in for the step's opaque ones.
  Status read_inputs(const Op& op, std::vector<std::vector<double>>* inputs) {
    const std::vector<OperandSpec>& specs = op.plan->operands();
    // Grown, never shrunk: each vector keeps its storage for the next op (see HostPool).
    if (inputs->size() < specs.size()) inputs->resize(specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
      // What is refilled is resized, not cleared: after a clear the resize writes zeros first.
      if (specs[i].is_output && !specs[i].reads_previous()) {
        (*inputs)[i].clear();
        continue;
      }
      if (opaque_operand(specs[i])) {
        const auto saved = reference_state_.find(s_.memory.root(op.slots[i]));
        if (saved == reference_state_.end())
          return Status::Failed(
              fmt::format("{}: no reference to read", output_name(op, static_cast<int>(i))));
        from_bytes(saved->second.data(), static_cast<std::size_t>(specs[i].elements()),
                   specs[i].dtype, &(*inputs)[i]);
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
    // A TF32 product is held to TF32's rounding, whatever its output's storage; an output
    // rounded through a narrower dtype, to that dtype's.
    return op_tolerance(data_type(op.desc) == DType::tf32 ? DType::tf32
                                                          : op.plan->operands()[index].precision());
  }

  // Entry `n` of outputs_ made ready for an output, its vectors' storage kept from earlier ops.
  Output& reuse_output(std::size_t n, int index, double tolerance) {
    if (outputs_.size() <= n) outputs_.resize(n + 1);
    Output& output = outputs_[n];
    output.index = index, output.tolerance = tolerance, output.magnitude_rounding = 0;
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
      if (output.magnitude_rounding > 0)  // a data gradient: its terms' rounding on top
        tolerance += output.magnitude_rounding * magnitude / std::max(want_norm, 1e-300);
      else if (want_norm < kCancellation * magnitude)
        error = error * want_norm / magnitude;
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
    out_->add_output(error, tolerance, output_name(op, output.index));
    if (!(error <= tolerance)) out_->passed = false;
  }

  // `values` rounded to nearest even in `dtype`: what a cast to it must produce exactly.
  static std::vector<double> rounded_to(const std::vector<double>& values, DType dtype) {
    const std::vector<char> bytes = to_bytes(values, dtype);
    return from_bytes(bytes.data(), values.size(), dtype);
  }

  // A cast rounds to nearest even: its output must be exactly its input so rounded.
  Status check_cast(const Op& op, const CastOp& cast) {
    std::vector<std::vector<double>>& inputs = inputs_;
    TB_RETURN_IF_ERROR(read_inputs(op, &inputs));
    TB_RETURN_IF_ERROR(s_.execute(op));
    const std::vector<OperandSpec>& specs = op.plan->operands();
    const int src = operand_index(specs, "src"), dst = operand_index(specs, "dst");
    Output output{dst, {}, rounded_to(inputs[src], cast.to), {}, {}, kExactTolerance};
    TB_RETURN_IF_ERROR(step_values(op, dst, &output.got));
    judge(op, output);
    ++out_->ops_checked;
    return Status::Ok();
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

  // Values [offset, offset + count) of the step's flat operand `index` of `op`.
  Status flat_values(const Op& op, int index, std::int64_t offset, std::int64_t count,
                     std::vector<double>* out) {
    const DType dtype = storage_dtype(op.plan->operands()[index].dtype);
    const Buffer whole = s_.memory.buffer(op.slots[index]);
    const std::size_t size = dtype_size(dtype);
    const Buffer part = slice(whole, static_cast<std::size_t>(offset) * size,
                              static_cast<std::size_t>(count) * size);
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
  Status check_by_tensors(const Op& op) {
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
    for (int p : sampled_parameters(s_.network)) {
      Range range{s_.parameter_offsets[p], s_.network.parameters()[p].elements(),
                  std::vector<std::vector<double>>(specs.size())};
      for (std::size_t i = 0; i < specs.size(); ++i) {
        const int index = static_cast<int>(i);
        std::vector<double>& values = range.inputs[i];
        if (specs[i].is_output && !specs[i].reads_previous()) continue;
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
    std::size_t sampled = 0;  // values, over every range: each output's copies sized once
    for (const Range& range : ranges) sampled += static_cast<std::size_t>(range.length);
    for (std::size_t n = 0; n < compared.size(); ++n) {
      Output& output = reuse_output(n, compared[n], tolerance_of(op, compared[n]));
      output.want.reserve(sampled), output.got.reserve(sampled);
      if (updated_in_place(specs[compared[n]])) output.before.reserve(sampled);
    }
    const auto* cast = std::get_if<CastOp>(&op.desc);
    std::vector<double> values;
    for (const Range& range : ranges) {
      const OpDesc part = over_one_tensor(op.desc, range.length);
      std::unique_ptr<Plan> plan;
      if (!cast) {
        TB_RETURN_IF_ERROR(host_->plan(*reference_op(part), &plan));
        TB_RETURN_IF_ERROR(pool_.fit(*plan));
        for (std::size_t i = 0; i < specs.size(); ++i)
          if (!specs[i].is_output || specs[i].reads_previous())
            TB_RETURN_IF_ERROR(import_values(*host_, *plan, static_cast<int>(i), range.inputs[i],
                                             pool_.operand[i], &scratch_));
        TB_RETURN_IF_ERROR(host_->execute(*plan, pool_.operand, pool_.workspace));
      }
      for (std::size_t n = 0; n < compared.size(); ++n) {
        Output& output = outputs_[n];
        const int index = compared[n];
        if (cast) {
          values = rounded_to(range.inputs[operand_index(specs, "src")], cast->to);
        } else {
          TB_RETURN_IF_ERROR(
              export_values(*host_, *plan, index, pool_.operand[index], &values, &scratch_));
        }
        output.want.insert(output.want.end(), values.begin(), values.end());
        TB_RETURN_IF_ERROR(flat_values(op, index, range.offset, range.length, &values));
        output.got.insert(output.got.end(), values.begin(), values.end());
        if (updated_in_place(specs[index]))
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

  // The plain values of operand `index` at `positions`, gathered where the step holds
  // them (Backend::gather_operand): only they leave the device.
  Status gathered_values(const Op& op, int index, std::span<const std::int64_t> positions,
                         std::vector<double>* out) {
    const int slot = s_.memory.root(op.slots[index]);
    const OperandSpec& spec = op.plan->operands()[index];
    scratch_.resize(positions.size() * dtype_size(spec.dtype));
    if (s_.memory[slot].host)
      TB_RETURN_IF_ERROR(
          gather_plain(s_.memory[slot].buffer.data, spec, positions, scratch_.data()));
    else
      TB_RETURN_IF_ERROR(s_.backend.gather_operand(*op.plan, index, s_.memory[slot].buffer,
                                                   positions, scratch_.data()));
    from_bytes(scratch_.data(), positions.size(), spec.dtype, out);
    return Status::Ok();
  }

  // A product too large for its f64 loops: each output on sampled elements, one dot product
  // each, from the input elements the step's op read, gathered before it ran (an operand the
  // samples read much of, whole); the outputs' sampled elements gathered after.
  Status check_sampled(const Op& op) {
    const std::vector<OperandSpec>& specs = op.plan->operands();
    std::size_t outputs = 0;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (!specs[i].is_output) continue;
      if (planned_.size() <= outputs) planned_.resize(outputs + 1);
      PlannedSamples& p = planned_[outputs++];
      p.output = static_cast<int>(i);
      p.plan =
          plan_samples(op.desc, specs, specs[i].name, options_.samples, mix64(++sample_stream_));
      if (p.inputs.size() < specs.size()) p.inputs.resize(specs.size());
      for (std::size_t j = 0; j < specs.size(); ++j) {
        GatheredValues& values = p.inputs[j];
        values.index.clear();  // storage kept for the next op
        const bool read = !specs[j].is_output || specs[j].reads_previous();
        // The values are resized, not cleared first: a cleared vector's resize would write
        // zeros over a whole operand before its values.
        if (read && p.plan.dense[j]) {
          TB_RETURN_IF_ERROR(step_values(op, static_cast<int>(j), &values.value));
        } else if (read && !p.plan.reads[j].empty()) {
          values.index = p.plan.reads[j];
          TB_RETURN_IF_ERROR(gathered_values(op, static_cast<int>(j), values.index, &values.value));
        } else {
          values.value.clear();
        }
      }
    }
    TB_RETURN_IF_ERROR(s_.execute(op));
    for (std::size_t n = 0; n < outputs; ++n) {
      const PlannedSamples& p = planned_[n];
      const SampledOutput want = sample_reference(op.desc, specs, specs[p.output].name,
                                                  std::span(p.inputs).first(specs.size()), p.plan);
      Output output{p.output, {}, want.value, want.magnitude, {}, tolerance_of(op, p.output)};
      TB_RETURN_IF_ERROR(gathered_values(op, p.output, want.index, &output.got));
      judge(op, output);
    }
    ++out_->ops_sampled;
    return Status::Ok();
  }

  Status check_in_full(const Op& op, const OpDesc& reference) {
    std::unique_ptr<Plan> plan;
    TB_RETURN_IF_ERROR(host_->plan(reference, &plan));
    HostPool& buffers = pool_;
    TB_RETURN_IF_ERROR(buffers.fit(*plan));
    std::vector<std::vector<double>>& inputs = inputs_;
    TB_RETURN_IF_ERROR(read_inputs(op, &inputs));
    const std::vector<OperandSpec>& specs = plan->operands();
    for (std::size_t i = 0; i < specs.size(); ++i)
      if (!specs[i].is_output || specs[i].reads_previous())
        TB_RETURN_IF_ERROR(import_values(*host_, *plan, static_cast<int>(i), inputs[i],
                                         buffers.operand[i], &scratch_));
    TB_RETURN_IF_ERROR(s_.execute(op));
    TB_RETURN_IF_ERROR(host_->execute(*plan, buffers.operand, buffers.workspace));
    std::span<Output> outputs;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (!specs[i].is_output || statistics_operand(specs[i])) continue;
      const int index = static_cast<int>(i);
      Output& output = reuse_output(outputs.size(), index, tolerance_of(op, index));
      TB_RETURN_IF_ERROR(
          export_values(*host_, *plan, index, buffers.operand[i], &output.want, &scratch_));
      if (opaque_operand(specs[i])) {
        TB_RETURN_IF_ERROR(step_decisions(op, index, &output.want));
        to_bytes(output.want, op.plan->operands()[i].dtype,
                 &reference_state_[s_.memory.root(op.slots[i])]);
        continue;
      }
      TB_RETURN_IF_ERROR(step_values(op, index, &output.got));
      if (specs[i].dtype == DType::i32) output.tolerance = kExactTolerance;  // a flag or index
      if (updated_in_place(specs[i])) output.before = inputs[i];
      ReductionMagnitude magnitude = reduction_magnitude(op.desc, specs, inputs, index);
      output.magnitude = std::move(magnitude.sums);
      output.magnitude_rounding = magnitude.rounding;
      outputs = std::span<Output>(outputs_.data(), outputs.size() + 1);
    }
    // A product whose output cancels (a bias gradient whose exact value is 0: attention's key
    // bias) has no meaningful relative error: it is held to the forward error bound of a sum
    // instead, relative to the same product of the inputs' absolute values.
    const bool any_off = std::any_of(outputs.begin(), outputs.end(), [](const Output& o) {
      return !(relative_l2_error(o.got, o.want) <= o.tolerance);
    });
    if (any_off && is_linear_product(op.desc)) {
      for (std::size_t i = 0; i < specs.size(); ++i) {
        if (specs[i].is_output) continue;
        for (double& v : inputs[i]) v = std::fabs(v);
        TB_RETURN_IF_ERROR(import_values(*host_, *plan, static_cast<int>(i), inputs[i],
                                         buffers.operand[i], &scratch_));
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

  const StepView s_;
  const OpCheckOptions& options_;
  OpCheck* out_;
  std::unique_ptr<Backend> host_;
  HostPool pool_{*host_};
  std::vector<std::vector<double>> inputs_;  // by operand; their storage kept between ops
  std::vector<char> scratch_;                // raw bytes of an export, likewise
  std::vector<Output> outputs_;              // an op's compared outputs, likewise
  std::vector<double> sampled_values_;       // a sampled output, a ReLU's output, likewise
  // A sampled op's outputs: each one's plan and the input values it reads, likewise.
  struct PlannedSamples {
    int output = 0;
    SamplePlan plan;
    std::vector<GatheredValues> inputs;  // by operand
  };
  std::vector<PlannedSamples> planned_;
  // Masks and indices the f64 forward made, by root slot, in their operands' own dtype (i32:
  // half of an f64 copy, for every mask and index of the network until the backward reads it).
  std::map<int, std::vector<char>> reference_state_;
  std::uint64_t sample_stream_ = 0;  // a fresh sample per output
};

OpCheckFootprint::OpCheckFootprint(const StepView& step, const OpCheckOptions& options)
    : step_(step), options_(options), host_(make_reference_backend()) {}
OpCheckFootprint::~OpCheckFootprint() = default;

void OpCheckFootprint::grow(std::vector<std::uint64_t>& largest, std::size_t position,
                            std::uint64_t bytes) {
  if (largest.size() <= position) largest.resize(position + 1, 0);
  largest[position] = std::max(largest[position], bytes);
}

// Mirrors what Checker::check keeps for `op` on each path.
Status OpCheckFootprint::add(const StepOp& op) {
  const std::vector<OperandSpec>& specs = op.plan->operands();
  auto f64_bytes = [&](std::size_t i) {
    return 8 * static_cast<std::uint64_t>(specs[i].elements());
  };
  auto read = [&](std::size_t i) { return !specs[i].is_output || specs[i].reads_previous(); };
  const CheckPath path = check_path(op, options_);
  if (path == CheckPath::unchecked) return Status::Ok();
  if (path == CheckPath::by_tensors) {
    // The sampled tensors (check_by_tensors): their values per flat operand read, for this op
    // only; per compared output, want, got and (updated in place) before; the reference plan's
    // operands at the largest tensor's size.
    std::uint64_t sampled = 0, largest = 0;
    for (int p : sampled_parameters(step_.network)) {
      const auto elements = static_cast<std::uint64_t>(step_.network.parameters()[p].elements());
      sampled += 8 * elements;
      largest = std::max(largest, 8 * elements);
    }
    std::uint64_t read_copies = 0, changes = 0;  // changes: an update judged (judge())
    for (std::size_t i = 0, n = 0; i < specs.size(); ++i) {
      if (read(i)) read_copies += sampled;
      grow(reference_operands_, i, largest);
      if (!specs[i].is_output) continue;
      grow(outputs_, n++, sampled * (updated_in_place(specs[i]) ? 3 : 2));
      if (updated_in_place(specs[i])) changes = 2 * sampled;
    }
    transient_ = std::max(transient_, read_copies + changes + largest);  // + one tensor's values
    scratch_ = std::max(scratch_, largest);
    return Status::Ok();
  }
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (read(i)) grow(inputs_, i, f64_bytes(i));
    scratch_ = std::max(scratch_, f64_bytes(i));
  }
  if (path == CheckPath::cast) {  // its output's want and got, for this op only
    transient_ = std::max(transient_, 2 * f64_bytes(operand_index(specs, "dst")));
    return Status::Ok();
  }
  if (path == CheckPath::sampled) {  // at most each output whole (gathered: its samples only)
    for (std::size_t i = 0; i < specs.size(); ++i)
      if (specs[i].is_output) sampled_values_ = std::max(sampled_values_, f64_bytes(i));
    return Status::Ok();
  }
  std::unique_ptr<Plan> plan;
  TB_RETURN_IF_ERROR(host_->plan(*reference_op(op.desc), &plan));
  const std::vector<OperandSpec>& reference = plan->operands();
  for (std::size_t i = 0; i < reference.size(); ++i)
    grow(reference_operands_, i, reference[i].bytes);
  grow(reference_operands_, reference.size(), plan->workspace_bytes());
  std::size_t compared = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].is_output || statistics_operand(specs[i])) continue;
    if (opaque_operand(specs[i])) {  // the f64 forward's values, kept for the backward
      grow(outputs_, compared, f64_bytes(i));
      saved_state_[step_.memory.root(op.slots[i])] =
          static_cast<std::uint64_t>(specs[i].elements()) * dtype_size(specs[i].dtype);
      if (specs[i].name == "relu_mask")  // the step's ReLU output, read to make its mask
        sampled_values_ = std::max(sampled_values_, f64_bytes(i));
      continue;
    }
    // want and got; before, where updated in place (and the changes judged, while judged); the
    // magnitudes of a product's cancelling output.
    std::uint64_t held = 2 * f64_bytes(i);
    if (updated_in_place(specs[i])) {
      held += f64_bytes(i);
      transient_ = std::max(transient_, 2 * f64_bytes(i));
    }
    if (is_linear_product(op.desc)) held += f64_bytes(i);
    grow(outputs_, compared++, held);
  }
  return Status::Ok();
}

std::uint64_t OpCheckFootprint::bytes() const {
  std::uint64_t total = scratch_ + sampled_values_ + transient_;
  for (const std::vector<std::uint64_t>* held : {&inputs_, &reference_operands_, &outputs_})
    for (std::uint64_t bytes : *held) total += bytes;
  for (const auto& [slot, bytes] : saved_state_) total += bytes;
  return total;
}

OpChecker::OpChecker(const StepView& step, const OpCheckOptions& options, OpCheck* out)
    : checker_(std::make_unique<Checker>(step, options, out)) {}
OpChecker::~OpChecker() = default;

Status OpChecker::check(const StepOp& op) {
  return checker_->check(op);
}

}  // namespace tb
