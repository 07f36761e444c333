// conv: forward, backward-data and backward-weights 2-D convolution.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "backends/product_reference.h"
#include "backends/reference/reference.h"
#include "workloads/kind_registry.h"

namespace tb {
namespace {

const WorkloadKind& conv_kind();  // the key table, with the factory below

constexpr int kSampledOutputs = 256;
// Multiply-adds the fp64 reference of every output may cost: 2^28 is about 0.3 s on two cores
// of this machine. Beyond it the check samples and probes every output row in as many column
// groups as the same budget allows (cpu::conv_probe_error).
constexpr std::int64_t kReferenceBudget = std::int64_t{1} << 28;
constexpr std::int64_t kProbeDoubles = std::int64_t{1} << 24;  // each of the probe's two arrays

const char* direction_name(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::forward:
      return "fwd";
    case ConvDirection::backward_data:
      return "bwd_data";
    case ConvDirection::backward_weights:
      return "bwd_weights";
  }
  return "?";
}

class ConvWorkload final : public OpWorkload {
 public:
  ConvWorkload(ConvOp op, std::string name) : op_(op), name_(std::move(name)) {}

  Descriptor descriptor() const override {
    std::map<std::string, std::string> values = {
        {"name", name_},
        {"dir", direction_name(op_.direction)},
        {"dtype", std::string(dtype_name(op_.dtype))},
        {"epilogue", op_.epilogue == ConvEpilogue::none   ? "none"
                     : op_.epilogue == ConvEpilogue::bias ? "bias"
                                                          : "bias_relu"}};
    for (auto [key, value] : {std::pair{"mb", op_.mb},
                              {"ic", op_.ic},
                              {"ih", op_.ih},
                              {"iw", op_.iw},
                              {"oc", op_.oc},
                              {"kh", op_.kh},
                              {"kw", op_.kw},
                              {"sh", op_.sh},
                              {"sw", op_.sw},
                              {"ph", op_.ph},
                              {"pw", op_.pw}})
      values[key] = std::to_string(value);
    return canonical_descriptor(conv_kind(), values);
  }

  DType dtype() const override { return op_.dtype; }
  Headline headline() const override { return {"tflops", "TFLOP/s", ""}; }

  WorkCounts counts() const override {
    WorkCounts counts;
    counts.flops = product_flops(op_);
    const double weights_bytes =
        static_cast<double>(op_.oc * op_.ic * op_.kh * op_.kw) *
        (op_.direction == ConvDirection::backward_weights ? 4 : dtype_size(op_.dtype));
    const std::int64_t bias = op_.epilogue == ConvEpilogue::none ? 0 : op_.oc;
    counts.bytes = static_cast<double>(op_.mb * op_.ic * op_.ih * op_.iw +
                                       op_.mb * op_.oc * op_.oh() * op_.ow() + bias) *
                       dtype_size(op_.dtype) +
                   weights_bytes;
    counts.items = static_cast<double>(op_.mb);
    return counts;
  }

  std::uint64_t device_bytes() const override {
    return static_cast<std::uint64_t>(counts().bytes * 1.1);
  }

  Status setup(Backend& backend, std::uint64_t seed) override {
    TB_RETURN_IF_ERROR(plan_and_allocate(backend, op_));
    seed_ = seed;
    // Every input, seeded by its place in the declaration (the output is the last).
    const std::vector<OperandSpec>& specs = plan_->operands();
    for (std::size_t operand = 0; operand < specs.size(); ++operand) {
      if (specs[operand].is_output) continue;
      std::vector<float>& values = inputs_[specs[operand].name];
      values = random_values(specs[operand].elements(), seed + operand, specs[operand].dtype);
      TB_RETURN_IF_ERROR(import(specs[operand].name, values));
    }
    return Status::Ok();
  }

  Validation validate() override {
    const char* output = output_operand();
    Status status = poison(output);
    if (status.ok()) status = run();
    std::vector<double> out;
    if (status.ok()) status = export_doubles(output, &out);
    if (!status.ok()) return {false, "", 0, 0, 0, status.message()};

    Validation result = check_finite_and_nonzero(out);
    const OperandSpec& out_spec = plan_->operands()[operand_at(output)];
    const std::int64_t reduction =
        op_.direction == ConvDirection::forward         ? op_.ic * op_.kh * op_.kw
        : op_.direction == ConvDirection::backward_data ? op_.oc * op_.kh * op_.kw
                                                        : op_.mb * op_.oh() * op_.ow();
    // Every output when the fp64 reference of all of them fits the budget (about 0.3 s here);
    // otherwise kSampledOutputs of them, corners included, and the probe.
    const auto outputs = static_cast<std::int64_t>(out.size());
    const bool every_output = outputs * reduction <= kReferenceBudget;
    const std::int64_t checked = every_output ? outputs : kSampledOutputs;
    const cpu::ConvAsGemm shape = cpu::conv_as_gemm(op_);
    const std::int64_t probe_groups =
        every_output || op_.epilogue == ConvEpilogue::bias_relu
            ? 0
            : std::clamp<std::int64_t>(
                  std::min(kReferenceBudget / (shape.batches * shape.rows * shape.inner),
                           kProbeDoubles / shape.inner),
                  1, shape.columns);
    result.method =
        every_output ? std::string("fp64 reference on every output, NaN-poisoned output")
        : probe_groups > 0
            ? fmt::format(
                  "Freivalds probe on every output row in {} column groups of {} (one element "
                  "off by e error scales moves its group by e/{:.3g}) and fp64 reference on {} "
                  "sampled outputs, NaN-poisoned output",
                  probe_groups, (shape.columns + probe_groups - 1) / probe_groups,
                  std::sqrt(static_cast<double>(shape.columns) / probe_groups), kSampledOutputs)
            : fmt::format("fp64 reference on {} sampled outputs, NaN-poisoned output",
                          kSampledOutputs);
    result.tolerance = kErrorTolerance;
    if (!result.passed) return result;

    const cpu::ErrorScale scale = error_scale(out_spec.precision(), reduction);
    const double worst = sampled_error(out, out_spec.dims, scale, checked, every_output);
    // Beyond the budget, a probe over every output sees one wrong element or tile as well
    // (not after a ReLU, which is not linear).
    double probe = 0;
    if (probe_groups > 0)
      probe = cpu::conv_probe_error(op_, product_inputs().first, product_inputs().second,
                                    op_.epilogue == ConvEpilogue::bias ? input("bias") : nullptr,
                                    out.data(), probe_groups, scale, seed_ + 8);
    result.checked = checked + (probe_groups > 0 ? shape.batches * shape.rows * probe_groups : 0);
    judge_sampled_and_probe(worst, probe, &result);
    return result;
  }

 private:
  // The worst error of `checked` outputs: every one, or the first, the last and random ones.
  double sampled_error(const std::vector<double>& out, const std::vector<std::int64_t>& dims,
                       const cpu::ErrorScale& scale, std::int64_t checked,
                       bool every_output) const {
    const auto outputs = static_cast<std::int64_t>(out.size());
    std::vector<std::int64_t> flat(static_cast<std::size_t>(checked));
    std::mt19937_64 rng(seed_ + 7);
    for (std::int64_t sample = 0; sample < checked; ++sample)
      flat[sample] = every_output  ? sample
                     : sample == 0 ? 0
                     : sample == 1 ? outputs - 1
                                   : static_cast<std::int64_t>(rng() % outputs);
    double worst = 0;
#pragma omp parallel for schedule(dynamic, 64) reduction(max : worst)
    for (std::int64_t sample = 0; sample < checked; ++sample) {
      std::int64_t index[4];
      for (std::int64_t d = 3, rest = flat[sample]; d >= 0; --d) {
        index[d] = rest % dims[d];
        rest /= dims[d];
      }
      reference::ProductSum ref = reference(index);
      if (op_.epilogue != ConvEpilogue::none)  // bias, then ReLU, on the fp64 sum
        reference::add_bias(ref, input("bias")[index[1]], op_.epilogue == ConvEpilogue::bias_relu);
      worst = std::max(worst, scale.error(out[static_cast<std::size_t>(flat[sample])],
                                          {ref.value, ref.squares}));
    }
    return worst;
  }
  reference::ProductSum reference(const std::int64_t (&i)[4]) const {
    const auto [in0, in1] = product_inputs();
    switch (op_.direction) {
      case ConvDirection::forward:  // src, weights -> dst
        return reference::conv_forward_element(op_, in0, in1, i[0], i[1], i[2], i[3]);
      case ConvDirection::backward_data:  // diff_dst, weights -> diff_src
        return reference::conv_backward_data_element(op_, in0, in1, i[0], i[1], i[2], i[3]);
      case ConvDirection::backward_weights:  // src, diff_dst -> diff_weights
        return reference::conv_backward_weights_element(op_, in0, in1, i[0], i[1], i[2], i[3]);
    }
    return {};
  }

  const char* output_operand() const {
    return op_.direction == ConvDirection::forward         ? "dst"
           : op_.direction == ConvDirection::backward_data ? "diff_src"
                                                           : "diff_weights";
  }
  const float* input(std::string_view name) const {
    return inputs_.at(std::string(name)).data();
  }
  // The direction's two product inputs, in the order the references take them.
  std::pair<const float*, const float*> product_inputs() const {
    switch (op_.direction) {
      case ConvDirection::forward:
        return {input("src"), input("weights")};
      case ConvDirection::backward_data:
        return {input("diff_dst"), input("weights")};
      case ConvDirection::backward_weights:
        return {input("src"), input("diff_dst")};
    }
    return {};
  }

  ConvOp op_;
  std::string name_;
  std::uint64_t seed_ = 0;
  // By operand name: plain NCHW / OIHW (and the bias), rounded to their dtypes.
  std::map<std::string, std::vector<float>> inputs_;
};

const WorkloadKind& conv_kind() {
  static const WorkloadKind kind{
      "conv",
      "2-D convolution forward / backward-data / backward-weights",
      {label_key(), integer_key("mb", "16", "minibatch"),
       required_integer_key("ic", "input channels"), required_integer_key("ih", "input height"),
       integer_like_key("iw", "ih", "input width"), required_integer_key("oc", "output channels"),
       required_integer_key("kh", "kernel height"), integer_like_key("kw", "kh", "kernel width"),
       integer_key("sh", "1", "stride in height"), integer_like_key("sw", "sh", "stride in width"),
       integer_key("ph", "0", "padding in height, each side", 0),
       integer_like_key("pw", "ph", "padding in width, each side", 0),
       choice_key("dir", "fwd", {"fwd", "bwd_data", "bwd_weights"},
                  "forward, backward-data or backward-weights"),
       choice_key("dtype", "f32", {"f32", "bf16", "f16", "tf32", "f64"},
                  "type of the data and weights"),
       omitted_at_default(
           choice_key("epilogue", "none", {"none", "bias", "bias_relu"},
                      "dir=fwd only: a bias, or a bias and ReLU, fused into the convolution")),
       shapes_key()}};
  return kind;
}

std::unique_ptr<Workload> make_conv(const Descriptor& descriptor) {
  DescriptorReader reader(descriptor, conv_kind());
  ConvOp op;
  const std::string name = reader.text("name");
  op.mb = reader.integer("mb");
  op.ic = reader.integer("ic");
  op.ih = reader.integer("ih");
  op.iw = reader.integer("iw");
  op.oc = reader.integer("oc");
  op.kh = reader.integer("kh");
  op.kw = reader.integer("kw");
  op.sh = reader.integer("sh");
  op.sw = reader.integer("sw");
  op.ph = reader.integer("ph");
  op.pw = reader.integer("pw");
  // Bounds every size, FLOP and byte count below, and the padded extents (each factor < 2^59).
  reader.checked_product({op.mb, op.ic, op.oc, op.ih, op.iw, op.kh, op.kw, 8},
                         "mb x ic x oc x ih x iw x kh x kw x 8");
  if (op.ph >= op.kh || op.pw >= op.kw)
    throw UsageError(
        fmt::format("'{}': padding must be smaller than the kernel", descriptor.to_string()));
  const std::string dir = reader.choice("dir");
  op.direction = dir == "fwd"        ? ConvDirection::forward
                 : dir == "bwd_data" ? ConvDirection::backward_data
                                     : ConvDirection::backward_weights;
  op.dtype = parse_dtype(reader.choice("dtype"));
  const std::string epilogue = reader.choice("epilogue");
  op.epilogue = epilogue == "bias"        ? ConvEpilogue::bias
                : epilogue == "bias_relu" ? ConvEpilogue::bias_relu
                                          : ConvEpilogue::none;
  reader.reject_unknown_keys();
  if (op.epilogue != ConvEpilogue::none && op.direction != ConvDirection::forward)
    throw UsageError(
        fmt::format("'{}': an epilogue (bias, ReLU) is for dir=fwd only", descriptor.to_string()));
  if (op.ih + 2 * op.ph < op.kh || op.iw + 2 * op.pw < op.kw)
    throw UsageError(
        fmt::format("'{}': the kernel is larger than the padded input", descriptor.to_string()));
  return std::make_unique<ConvWorkload>(op, name);
}

}  // namespace

KindEntry conv_kind_entry() {
  return {{conv_kind()},
          [](const Descriptor& descriptor, const DeviceInfo&) { return make_conv(descriptor); }};
}

}  // namespace tb
