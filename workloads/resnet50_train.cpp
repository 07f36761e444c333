// resnet50-train: whole ResNet-50 training steps (forward, loss, backward, SGD update) back to
// back on one backend, on a fixed batch of seeded random images and labels.
#include <cmath>

#include <fmt/format.h>

#include "models/reference_check.h"
#include "models/resnet.h"
#include "models/training_step.h"
#include "workloads/kinds.h"

namespace tb {
namespace {

struct ResNetTrainConfig {
  ResNetConfig model;
  StepOptions step;
  SgdSettings sgd;
  std::int64_t sweep_largest = 0;  // set by a batch=sweep expansion: the largest batch that fits
};

// Memory a sweep may plan for: what the device has free, less headroom for the rest of the
// process (the reduced networks validation builds, the report).
constexpr double kSweepMemoryFraction = 0.9;

// Gradient check before measuring: the network reduced to every block kind at 64x64 (two
// blocks per stage), batch 4, width 16, against the f64 reference. Most seeds agree to 2e-5;
// about one in four puts some pre-ReLU value or max-pool pair within fp32 rounding of its
// kink, which routes one element's gradient differently and moves upstream gradients by up to
// 3% (measured over 12 seeds). Wiring errors are of order one, so 5% catches them; each op's
// arithmetic is held to 1e-5 against the reference by the tests.
constexpr double kReducedGradientTolerance = 5e-2;

class ResNetTrainWorkload final : public Workload {
 public:
  explicit ResNetTrainWorkload(ResNetTrainConfig config)
      : config_(std::move(config)), network_(build_resnet(config_.model)) {}

  Descriptor descriptor() const override {
    Descriptor d("resnet50-train");
    d.set("batch", std::to_string(config_.model.batch))
        .set("image", std::to_string(config_.model.image))
        .set("width", std::to_string(config_.model.width))
        .set("classes", std::to_string(config_.model.classes))
        .set("dtype", std::string(dtype_name(config_.step.dtype)))
        .set("layout", config_.step.layout == Layout::native ? "native" : "plain")
        .set("conv", config_.step.winograd_allowed ? "auto" : "direct")
        .set("lr", fmt::format("{}", config_.sgd.learning_rate));
    if (config_.sweep_largest > 0) d.set("sweep_largest", std::to_string(config_.sweep_largest));
    return d;
  }
  DType dtype() const override { return config_.step.dtype; }
  WorkCounts counts() const override {
    WorkCounts counts;
    counts.items = static_cast<double>(config_.model.batch);
    counts.flops = training_flops_per_sample(network_) * counts.items;
    return counts;
  }
  std::uint64_t device_bytes() const override {
    return estimate_training_bytes(network_, config_.step.dtype);
  }

  Status setup(Backend& backend, std::uint64_t seed) override {
    backend_ = &backend;
    seed_ = seed;
    return prepared_step(backend, network_, config_.step, seed, seed, &step_);
  }

  Status run() override { return step_->run(/*update=*/true, config_.sgd); }

  // Untimed: (1) on a reduced network, every op of one step against the same op in f64 fed
  // the step's own inputs (tight: no amplification through the network); (2) for fp32, the
  // reduced network's every parameter gradient against a whole f64 step (catches wiring
  // errors; bf16 rounding amplified through 40 batch norms moves gradients by order one, so
  // bf16 relies on (1)); (3) on the measured network, three steps on the fixed batch give a
  // finite loss near ln(classes) that falls, and finite, non-zero gradients; (4) one
  // instrumented step for the per-layer breakdown.
  Validation validate() override {
    Validation result;
    const bool whole_step_check = config_.step.dtype != DType::bf16;
    result.method = fmt::format(
        "reduced ResNet (64x64, batch 4, width 16, 2 blocks per stage): every op of a step "
        "against f64 on its own inputs (relative L2; f32 1e-4, bf16 2e-2){}; measured network: "
        "loss finite, near ln(classes) and falling over 3 steps on the fixed batch, gradients "
        "finite and non-zero",
        whole_step_check ? fmt::format(", every parameter gradient against a whole f64 step "
                                       "({:g})",
                                       kReducedGradientTolerance)
                         : "");
    auto fail = [&](const std::string& message) {
      result.message = message;
      return result;
    };
    ResNetConfig reduced_config = config_.model;
    reduced_config.batch = 4, reduced_config.image = 64, reduced_config.width = 16;
    reduced_config.classes = 10, reduced_config.blocks = {2, 2, 2, 2};
    const Network reduced = build_resnet(reduced_config);
    {
      std::unique_ptr<TrainingStep> step;
      Status status = prepared_step(*backend_, reduced, config_.step, seed_, seed_, &step);
      if (status.ok()) status = step->run(/*update=*/false, config_.sgd);
      OpCheck check;
      if (status.ok()) status = step->check_ops(&check);
      if (!status.ok()) return fail("op check: " + status.message());
      result.error = check.worst_error;
      result.tolerance = check.worst_tolerance;
      result.checked = check.outputs_compared;
      if (!check.passed)
        return fail(fmt::format("{} off the f64 reference by {:.3g} (relative L2, allowed {:g})",
                                check.worst_output, check.worst_error, check.worst_tolerance));
    }
    Status status = Status::Ok();
    if (whole_step_check) {
      ReferenceComparison comparison;
      status = compare_with_reference(*backend_, reduced, config_.step, seed_, &comparison);
      if (!status.ok()) return fail("reference check: " + status.message());
      if (!(comparison.worst_gradient_error <= kReducedGradientTolerance))
        return fail(fmt::format("gradient of {} off the f64 reference by {:.3g} (relative L2)",
                                comparison.worst_parameter, comparison.worst_gradient_error));
    }

    std::vector<double> losses;
    for (int i = 0; i < 3; ++i) {
      if (status = step_->run(true, config_.sgd); !status.ok()) return fail(status.message());
      double loss = 0;
      if (status = step_->loss(&loss); !status.ok()) return fail(status.message());
      losses.push_back(loss);
    }
    const double chance = std::log(static_cast<double>(config_.model.classes));
    if (!std::isfinite(losses[0]) || losses[0] < 0.5 * chance || losses[0] > 3 * chance)
      return fail(fmt::format("initial loss {} is not near ln({}) = {:.3f}", losses[0],
                              config_.model.classes, chance));
    if (!(losses.back() < losses.front()))
      return fail(fmt::format("loss did not fall on a fixed batch: {}", fmt::join(losses, ", ")));
    std::vector<NamedTensor> grads;
    if (status = step_->gradients(&grads); !status.ok()) return fail(status.message());
    for (const NamedTensor& grad : grads) {
      const Validation finite =
          check_finite_and_nonzero(std::vector<float>(grad.values.begin(), grad.values.end()));
      if (!finite.passed) return fail(fmt::format("gradient of {}: {}", grad.name, finite.message));
    }
    losses_ = losses;
    if (status = step_->run(true, config_.sgd, &breakdown_); !status.ok())
      return fail(status.message());
    result.passed = true;
    return result;
  }

  std::string implementation() const override {
    return step_ ? fmt::format("{}", fmt::join(step_->implementations(), "; ")) : "";
  }
  std::string math_mode() const override {
    return config_.step.dtype == DType::bf16 ? "bf16 inputs, fp32 accumulation" : "strict";
  }

  nlohmann::json details() const override {
    nlohmann::json d;
    d["model"] = "resnet50 (torchvision v1.5)";
    d["parameters"] = network_.parameter_count();
    d["forward_macs_per_sample"] = network_.forward_macs_per_sample();
    d["flops_per_sample"] = training_flops_per_sample(network_);
    d["flop_convention"] = "training step = 3 x forward, 2 FLOPs per multiply-accumulate";
    d["memory_bytes"] = step_ ? step_->memory_bytes() : 0;
    d["optimizer"] = {{"kind", "sgd_momentum"},
                      {"learning_rate", config_.sgd.learning_rate},
                      {"momentum", config_.sgd.momentum},
                      {"weight_decay", config_.sgd.weight_decay}};
    d["validation_losses"] = losses_;
    if (config_.sweep_largest > 0)
      d["sweep"] = {{"largest_batch", config_.sweep_largest},
                    {"method", fmt::format("largest batch whose planned buffers (arena and "
                                           "workspace) fit in {:g} of the memory available",
                                           kSweepMemoryFraction)}};
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerTime& layer : breakdown_.layers)
      layers.push_back({{"layer", layer.name},
                        {"kind", layer.kind},
                        {"forward_s", layer.forward_s},
                        {"backward_s", layer.backward_s}});
    d["precision"] = config_.step.dtype == DType::bf16
                         ? "bf16 mixed: bf16 activations and convolutions, fp32 master weights, "
                           "gradients, optimizer, batch-norm statistics, classifier and loss"
                         : std::string(dtype_name(config_.step.dtype));
    d["breakdown"] = {{"method", "one instrumented step, waiting after every op"},
                      {"total_s", breakdown_.total_s},
                      {"optimizer_s", breakdown_.optimizer_s},
                      {"weight_cast_s", breakdown_.weight_cast_s},
                      {"layers", layers}};
    return d;
  }

 private:
  ResNetTrainConfig config_;
  Network network_;
  Backend* backend_ = nullptr;
  std::uint64_t seed_ = 0;
  std::unique_ptr<TrainingStep> step_;
  StepBreakdown breakdown_;
  std::vector<double> losses_;
};

}  // namespace

namespace {

ResNetTrainConfig parse_config(const Descriptor& descriptor, bool batch_may_sweep) {
  DescriptorReader reader(descriptor);
  ResNetTrainConfig config;
  if (batch_may_sweep && descriptor.get("batch") == "sweep") {
    reader.text("batch", "sweep");
    config.model.batch = 1;
  } else {
    config.model.batch = reader.integer("batch", 32);
  }
  config.sweep_largest = reader.integer("sweep_largest", 0, 0);
  config.model.image = reader.integer("image", 224, 32);
  config.model.width = reader.integer("width", 64);
  config.model.classes = reader.integer("classes", 1000, 2);
  config.step.dtype = parse_dtype(reader.choice("dtype", "f32", {"f32", "bf16"}));
  config.step.layout = reader.choice("layout", "native", {"native", "plain"}) == "native"
                           ? Layout::native
                           : Layout::plain;
  // auto: the library may pick Winograd for 3x3 convolutions (FLOPs still counted as direct).
  config.step.winograd_allowed = reader.choice("conv", "direct", {"direct", "auto"}) == "auto";
  // The linear scaling rule of the reference recipe: 0.1 per 256 images.
  config.sgd.learning_rate =
      static_cast<float>(reader.number("lr", 0.1 * static_cast<double>(config.model.batch) / 256));
  reader.reject_unknown_keys();
  return config;
}

// The largest batch whose planned step fits in `budget` bytes. Memory is linear in the batch,
// so two small plans give the slope; plans at the estimate confirm it.
Status largest_batch(Backend& backend, ResNetTrainConfig config, std::uint64_t budget,
                     std::int64_t* out) {
  auto bytes_at = [&](std::int64_t batch, std::uint64_t* bytes) {
    config.model.batch = batch;
    return TrainingStep::planned_bytes(backend, build_resnet(config.model), config.step, bytes);
  };
  std::uint64_t one = 0, two = 0;
  TB_RETURN_IF_ERROR(bytes_at(1, &one));
  TB_RETURN_IF_ERROR(bytes_at(2, &two));
  if (one > budget) return Status::OutOfMemory("not even one image fits in the memory available");
  const std::uint64_t per_image = std::max<std::uint64_t>(two - one, 1);
  std::int64_t batch = static_cast<std::int64_t>(1 + (budget - one) / per_image);
  for (std::uint64_t bytes = 0;; batch = std::max<std::int64_t>(1, batch * 97 / 100)) {
    TB_RETURN_IF_ERROR(bytes_at(batch, &bytes));
    if (bytes <= budget || batch == 1) break;
  }
  *out = batch;
  return Status::Ok();
}

}  // namespace

std::unique_ptr<Workload> make_resnet50_train(const Descriptor& descriptor) {
  if (descriptor.get("batch") == "sweep")
    throw UsageError(fmt::format("'{}': batch=sweep is expanded per backend by trainbench run",
                                 descriptor.to_string()));
  ResNetTrainConfig config = parse_config(descriptor, false);
  return std::make_unique<ResNetTrainWorkload>(config);
}

std::vector<Descriptor> expand_resnet50_sweep(const Descriptor& descriptor, Backend* backend,
                                              std::uint64_t memory_available) {
  if (descriptor.get("batch") != "sweep") return {descriptor};
  const ResNetTrainConfig config = parse_config(descriptor, true);
  std::int64_t largest = 1;
  if (backend) {
    const Status status = largest_batch(
        *backend, config, static_cast<std::uint64_t>(kSweepMemoryFraction * memory_available),
        &largest);
    if (!status.ok()) largest = 1;  // the single case then fails with the reason
  }
  std::vector<std::int64_t> batches;
  for (std::int64_t batch = 1; batch < largest; batch *= 2) batches.push_back(batch);
  batches.push_back(largest);
  std::vector<Descriptor> cases;
  for (std::int64_t batch : batches) {
    Descriptor d = descriptor;
    d.set("batch", std::to_string(batch)).set("sweep_largest", std::to_string(largest));
    if (!descriptor.has("lr")) d.erase("lr");
    cases.push_back(make_resnet50_train(d)->descriptor());
  }
  return cases;
}

}  // namespace tb
