// resnet50-train: whole ResNet-50 training steps (forward, loss, backward, SGD update) back to
// back on one backend, on a fixed batch of seeded random images and labels.
#include <cmath>

#include <fmt/format.h>

#include "models/reference_check.h"
#include "models/resnet.h"
#include "models/training_step.h"
#include "workloads/kind_registry.h"
#include "workloads/resnet50_train.h"
#include "workloads/training_workload.h"

namespace tb {
namespace {

const WorkloadKind& resnet50_train_kind();  // the key table, with the factory below

struct ResNetTrainConfig {
  ResNetConfig model;
  StepOptions step;
  OptimizerSettings sgd;
  BucketOptions buckets;
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
// arithmetic is held to 1e-5 against the reference by the tests. bf16 rounding amplified
// through 40 batch norms moves gradients by order one, so bf16 relies on the op check.
constexpr double kReducedGradientTolerance = 5e-2;

class ResNetTrainWorkload final : public TrainingWorkload {
 public:
  explicit ResNetTrainWorkload(const ResNetTrainConfig& config)
      : TrainingWorkload(build_resnet(config.model), config.step, config.sgd, config.buckets),
        config_(config) {}

  Descriptor descriptor() const override {
    return canonical_descriptor(
        resnet50_train_kind(),
        {{"batch", std::to_string(config_.model.batch)},
         {"image", std::to_string(config_.model.image)},
         {"width", std::to_string(config_.model.width)},
         {"classes", std::to_string(config_.model.classes)},
         {"dtype", std::string(dtype_name(config_.step.dtype))},
         {"layout", config_.step.layout == Layout::native ? "native" : "plain"},
         {"conv", config_.step.winograd_allowed ? "auto" : "direct"},
         {"lr", fmt::format("{}", config_.sgd.learning_rate)},
         {"bucket_mb", std::to_string(config_.buckets.bucket_bytes >> 20)},
         {"overlap", config_.buckets.overlap ? "1" : "0"},
         {"sweep_largest", std::to_string(config_.sweep_largest)}});
  }

 private:
  ReducedCase reduced_case(std::uint64_t seed, int ranks) const override {
    ResNetConfig reduced = config_.model;
    reduced.batch = 4 * ranks, reduced.image = 64, reduced.width = 16;
    reduced.classes = 10, reduced.blocks = {2, 2, 2, 2};
    Network network = build_resnet(reduced);
    std::vector<NamedTensor> batch = seeded_batch(network, seed);
    return {std::move(network), std::move(batch),
            "reduced ResNet (64x64, batch 4, width 16, 2 blocks per stage)",
            kReducedGradientTolerance};
  }
  SmallBatchCase small_batch_case(std::uint64_t seed) const override {
    ResNetConfig small = config_.model;
    small.batch = kSmallBatch;
    Network network = build_resnet(small);
    std::vector<NamedTensor> batch = seeded_batch(network, seed);
    return {std::move(network), std::move(batch)};
  }
  std::vector<NamedTensor> batch(std::uint64_t seed) const override {
    return seeded_batch(network(), seed);
  }
  double chance_loss() const override {
    return std::log(static_cast<double>(config_.model.classes));
  }
  std::string chance_description() const override { return "near ln(classes)"; }
  MixedPrecisionParts mixed_precision_parts() const override {
    return {"activations and convolutions",
            "master weights, gradients, optimizer, batch-norm statistics, classifier and loss"};
  }
  void add_details(nlohmann::json& d) const override {
    d["model"] = "resnet50 (torchvision v1.5)";
    if (config_.sweep_largest > 0)
      d["sweep"] = {{"largest_batch", config_.sweep_largest},
                    {"method", fmt::format("largest batch whose planned buffers (arena and "
                                           "workspace) and validation copies (the op check's f64 "
                                           "operands) fit in {:g} of the memory available",
                                           kSweepMemoryFraction)}};
  }

  ResNetTrainConfig config_;
};

const WorkloadKind& resnet50_train_kind() {
  static const WorkloadKind kind{
      "resnet50-train",
      "ResNet-50 training steps (forward, loss, backward, SGD momentum) on a fixed batch",
      {{.name = "batch",
        .type = KeyType::integer,
        .fallback = "32",
        .max = kLargestBatch,
        .also = "`sweep`",
        .help = "images per step; sweep: 1, 2, 4, ... and the largest that fits in memory"},
       integer_key("image", "224", "image height and width", 32, kLargestImage),
       integer_key("width", "64", "channels of the first stage (64: ResNet-50)", 1, kWidestStage),
       integer_key("classes", "1000", "classifier outputs", 2, kMostClasses),
       choice_key("dtype", "f32", {"f32", "tf32", "bf16", "f16"},
                  "the step's precision (bf16, f16: mixed, f32 master weights)"),
       choice_key("layout", "native", {"native", "plain"},
                  "native: activations in the layout the backend prefers (no reorders between "
                  "ops); plain: NCHW"),
       choice_key("conv", "direct", {"direct", "auto"},
                  "auto: the library may pick Winograd for 3x3 convolutions (FLOPs counted as "
                  "direct)"),
       {.name = "lr",
        .type = KeyType::number,
        .range = kLearningRate,
        .derived = "0.1 x batch / 256",
        .help = "SGD learning rate (the reference recipe's linear scaling rule)"},
       bucket_mb_key(),
       overlap_key(),
       omitted_at_default(
           integer_key("sweep_largest", "0",
                       "set by batch=sweep on its last case: the largest batch that fits", 0))}};
  return kind;
}

ResNetTrainConfig parse_config(const Descriptor& descriptor, bool batch_may_sweep) {
  DescriptorReader reader(descriptor, resnet50_train_kind());
  ResNetTrainConfig config;
  if (batch_may_sweep && descriptor.get("batch") == "sweep") {
    reader.text("batch");
    config.model.batch = 1;
  } else {
    config.model.batch = reader.integer("batch");
  }
  config.sweep_largest = reader.integer("sweep_largest");
  config.model.image = reader.integer("image");
  config.model.width = reader.integer("width");
  config.model.classes = reader.integer("classes");
  config.step.dtype = parse_dtype(reader.choice("dtype"));
  config.step.layout = reader.choice("layout") == "native" ? Layout::native : Layout::plain;
  // auto: the library may pick Winograd for 3x3 convolutions (FLOPs still counted as direct).
  config.step.winograd_allowed = reader.choice("conv") == "auto";
  // The linear scaling rule of the reference recipe: 0.1 per 256 images.
  config.sgd.learning_rate = static_cast<float>(
      reader.number_or("lr", 0.1 * static_cast<double>(config.model.batch) / 256));
  config.buckets = read_bucket_options(reader);
  reader.reject_unknown_keys();
  return config;
}

// The largest batch whose planned step, and the validation's op check beside it, fit in `budget`
// bytes. Memory is linear in the batch, so two small plans give the slope; plans at the estimate
// confirm it. The check's f64 copies matter: at batch 64 they took 24 GB here past the step's
// 15.4 GiB (half of them the forward's masks, kept until the backward).
Status largest_batch(Backend& backend, ResNetTrainConfig config, std::uint64_t budget,
                     std::int64_t* out) {
  const OpCheckOptions check = OpCheckOptions::measured_network(config.sgd);
  auto bytes_at = [&](std::int64_t batch, std::uint64_t* bytes) {
    config.model.batch = batch;
    const Network network = build_resnet(config.model);
    std::uint64_t step = 0, checked = 0;
    TB_RETURN_IF_ERROR(TrainingStep::planned_bytes(backend, network, config.step, &step));
    TB_RETURN_IF_ERROR(
        TrainingStep::planned_check_bytes(backend, network, config.step, check, &checked));
    *bytes = step + checked;
    return Status::Ok();
  };
  std::uint64_t one = 0, two = 0;
  TB_RETURN_IF_ERROR(bytes_at(1, &one));
  TB_RETURN_IF_ERROR(bytes_at(2, &two));
  if (one > budget) return Status::OutOfMemory("not even one image fits in the memory available");
  // A linear estimate from batches 1 and 2, then a search: a plan's workspace is not linear
  // in the batch (a library's kernel, and so its scratchpad, changes with the shape), so the
  // estimate can land on either side. `fits` fits; `too_big` does not.
  const std::uint64_t per_image = std::max<std::uint64_t>(two - one, 1);
  std::int64_t fits = 1, too_big = static_cast<std::int64_t>(1 + (budget - one) / per_image);
  std::uint64_t bytes = 0;
  constexpr std::int64_t kLargestBatch = std::int64_t{1} << 20;
  for (;;) {  // grow until a batch does not fit
    TB_RETURN_IF_ERROR(bytes_at(too_big, &bytes));
    if (bytes > budget || too_big >= kLargestBatch) break;
    fits = too_big;
    too_big *= 2;
  }
  while (too_big - fits > 1) {
    const std::int64_t middle = fits + (too_big - fits) / 2;
    TB_RETURN_IF_ERROR(bytes_at(middle, &bytes));
    (bytes <= budget ? fits : too_big) = middle;
  }
  *out = fits;
  return Status::Ok();
}

std::unique_ptr<Workload> make_resnet50_train(const Descriptor& descriptor) {
  if (descriptor.get("batch") == "sweep")
    throw UsageError(fmt::format("'{}': batch=sweep is expanded per backend by trainbench run",
                                 descriptor.to_string()));
  ResNetTrainConfig config = parse_config(descriptor, false);
  return std::make_unique<ResNetTrainWorkload>(config);
}

}  // namespace

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

KindEntry resnet50_train_kind_entry() {
  return {.kinds = {resnet50_train_kind()},
          .make = [](const Descriptor& descriptor,
                     const DeviceInfo&) { return make_resnet50_train(descriptor); },
          .expand_for_backend = &expand_resnet50_sweep};
}

}  // namespace tb
