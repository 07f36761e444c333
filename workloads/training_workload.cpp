#include "workloads/training_workload.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "models/data_parallel.h"
#include "models/reference_check.h"
#include "models/training_memory.h"
#include "workloads/standalone_ops.h"

namespace tb {

std::string optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd_momentum:
      return "sgd_momentum";
    case OptimizerKind::adamw:
      return "adamw";
    case OptimizerKind::lamb:
      return "lamb";
  }
  return "unknown";
}

bool fold_op_check(const OpCheck& check, Validation* result) {
  result->checked += check.outputs_compared;
  if (check.worst_error / check.worst_tolerance >=
      result->error / std::max(result->tolerance, 1e-300)) {
    result->error = check.worst_error;
    result->tolerance = check.worst_tolerance;
  }
  if (!check.passed)
    result->message = fmt::format("{} off the f64 reference by {:.3g} (relative L2, allowed {:g})",
                                  check.worst_output, check.worst_error, check.worst_tolerance);
  return check.passed;
}

std::string step_implementation(const TrainingStep* step) {
  return step ? fmt::format("{}", fmt::join(step->implementations(), "; ")) : "";
}

std::vector<ReferenceKernelUse> step_reference_kernels(const TrainingStep* step,
                                                       const StepBreakdown* breakdown) {
  std::vector<ReferenceKernelUse> uses;
  if (!step) return uses;
  for (const ReferenceOp& op : step->reference_ops()) {
    ReferenceKernelUse use{op.op, op.implementation, std::nullopt};
    if (breakdown && breakdown->total_s > 0) {
      double seconds = 0;
      for (const ReferenceOp& timed : breakdown->reference_ops)
        if (timed.op == op.op) seconds += timed.seconds;
      use.share_of_time = seconds / breakdown->total_s;
    }
    uses.push_back(use);
  }
  return uses;
}

std::string training_math_mode(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return "bf16 inputs, fp32 accumulation";
    case DType::f16:
      return "f16 inputs, fp32 accumulation, dynamic loss scaling";
    case DType::tf32:
      return "TF32 GEMMs and convolutions, fp32 accumulation";
    default:
      return "strict";
  }
}

nlohmann::json loss_scale_details(const DynamicLossScale& scale) {
  return {
      {"rule", fmt::format("dynamic (PyTorch's GradScaler): a step with a non-finite gradient is "
                           "skipped and scales by {:g}; {} applied steps in a row scale by {:g}",
                           scale.backoff_factor, scale.growth_interval, scale.growth_factor)},
      {"scale", scale.scale},
      {"skipped_steps", scale.skipped_steps}};
}

std::string TrainingWorkload::precision_description() const {
  const DType dtype = step_options_.dtype;
  if (dtype == DType::tf32)
    return "tf32: fp32 data; convolutions, linear layers and attention GEMMs multiply in TF32 "
           "with fp32 accumulation";
  if (dtype != DType::bf16 && dtype != DType::f16) return std::string(dtype_name(dtype));
  const MixedPrecisionParts parts = mixed_precision_parts();
  return fmt::format("{0} mixed: {0} {1}; fp32 {2}{3}", dtype_name(dtype), parts.low_precision,
                     parts.fp32, dtype == DType::f16 ? "; dynamic loss scaling" : "");
}

Headline TrainingWorkload::headline() const {
  return {"samples_per_s", "samples/s",
          fmt::format("{} {}", descriptor().kind(), dtype_name(dtype()))};
}

WorkCounts TrainingWorkload::counts() const {
  WorkCounts counts;
  counts.items = static_cast<double>(network_.batch * ranks());
  counts.flops = training_flops_per_sample(network_) * counts.items;
  return counts;
}

std::uint64_t TrainingWorkload::device_bytes() const {
  return estimate_training_bytes(network_, step_options_);
}

TrainingMemory TrainingWorkload::memory_parts() const {
  return training_memory(network_, step_options_);
}

StepOptions TrainingWorkload::validation_options() const {
  StepOptions options = step_options_;
  options.validation_only = true;
  return options;
}

StepOptions TrainingWorkload::rank_options() const {
  StepOptions options = step_options_;
  options.data_parallel_ranks = ranks();
  if (world_) options.dropout_seed = rank_dropout_seed(options.dropout_seed, world_->rank());
  return options;
}

Status TrainingWorkload::setup(Backend& backend, std::uint64_t seed) {
  backend_ = &backend;
  seed_ = seed;
  if (ranks() == 1)
    return prepared_step(backend, network_, step_options_, batch(seed), seed, &step_);
  // Every rank starts from the same weights (the seed) and steps on its own batch.
  TB_RETURN_IF_ERROR(backend.make_communicator(*world_, &communicator_));
  const std::uint64_t batch_seed = mix64(seed + static_cast<std::uint64_t>(world_->rank()));
  TB_RETURN_IF_ERROR(
      prepared_step(backend, network_, rank_options(), batch(batch_seed), seed, &step_));
  return step_->exchange_gradients(communicator_.get(), buckets_);
}

bool TrainingWorkload::check_reduced_ops(const ReducedCase& reduced, Validation* result) {
  std::unique_ptr<TrainingStep> step;
  Status status =
      prepared_step(*backend_, reduced.network, validation_options(), reduced.batch, seed_, &step);
  OpCheck check;
  if (status.ok()) status = step->check_ops(&check, {.update = settings_});
  if (!status.ok()) {
    result->message = "op check: " + status.message();
    return false;
  }
  return fold_op_check(check, result);
}

nlohmann::json TrainingWorkload::OpCheckRecord::to_json() const {
  return {{"seconds", seconds},
          {"batch", batch},
          {"ops", ops},
          {"ops_sampled", ops_sampled},
          {"outputs_compared", outputs_compared},
          {"worst_output", worst_output},
          {"worst_error", worst_error},
          {"worst_tolerance", worst_tolerance}};
}

bool TrainingWorkload::record_op_check(const std::string& what, TrainingStep& step,
                                       std::int64_t batch, const OpCheckOptions& options,
                                       OpCheckRecord* record, Validation* result) {
  const auto start = std::chrono::steady_clock::now();
  OpCheck check;
  const Status status = step.check_ops(&check, options);
  if (!status.ok()) {
    result->message = fmt::format("op check {}: {}", what, status.message());
    return false;
  }
  *record = {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
             batch,
             check.ops_checked,
             check.ops_sampled,
             check.outputs_compared,
             check.worst_output,
             check.worst_error,
             check.worst_tolerance};
  return fold_op_check(check, result);
}

// Every op of the measured architecture at the small batch; where the measured batch is no
// larger, on the measured step itself.
bool TrainingWorkload::check_small_batch_ops(Validation* result) {
  const OpCheckOptions options = OpCheckOptions::measured_network(settings_);
  if (network_.batch <= kSmallBatch)
    return record_op_check("of the measured network", *step_, network_.batch, options,
                           &small_batch_check_, result);
  const SmallBatchCase small = small_batch_case(seed_);
  std::unique_ptr<TrainingStep> step;
  const Status status =
      prepared_step(*backend_, small.network, validation_options(), small.batch, seed_, &step);
  if (!status.ok()) {
    result->message = "op check at the small batch: " + status.message();
    return false;
  }
  return record_op_check(fmt::format("at batch {}", kSmallBatch), *step, kSmallBatch, options,
                         &small_batch_check_, result);
}

// The products of the measured step, sampled: their kernels are chosen by the batch's shape.
bool TrainingWorkload::check_measured_ops(Validation* result) {
  if (network_.batch <= kSmallBatch) return true;  // checked in full by check_small_batch_ops
  return record_op_check("of the measured network", *step_, network_.batch,
                         OpCheckOptions::measured_batch(settings_), &measured_check_, result);
}

bool TrainingWorkload::check_reduced_gradients(const ReducedCase& reduced, Validation* result) {
  ReferenceComparison comparison;
  const Status status = compare_with_reference(*backend_, reduced.network, validation_options(),
                                               reduced.batch, seed_, &comparison);
  if (!status.ok()) {
    result->message = "reference check: " + status.message();
    return false;
  }
  if (comparison.worst_gradient_error <= reduced.gradient_tolerance) return true;
  result->message = fmt::format("gradient of {} off the f64 reference by {:.3g} (relative L2)",
                                comparison.worst_parameter, comparison.worst_gradient_error);
  return false;
}

bool TrainingWorkload::check_losses(Validation* result) {
  auto fail = [&](const std::string& message) {
    result->message = message;
    return false;
  };
  // The loss before each applied update; a step skipped by loss scaling changes nothing.
  std::vector<double> losses;
  constexpr int kMaxAttempts = 24;  // f16 starts at 2^16 and halves per skipped step
  Status status = Status::Ok();
  // Instrumented: their breakdowns are the per-layer breakdown's (time_breakdown).
  breakdown_steps_.clear();
  for (int attempt = 0; attempt < kMaxAttempts && losses.size() < 3; ++attempt) {
    const std::int64_t before = step_->steps_taken();
    if (status = step_->run(true, settings_, &breakdown_steps_.emplace_back()); !status.ok())
      return fail(status.message());
    double loss = 0;
    if (status = step_->loss(&loss); !status.ok()) return fail(status.message());
    // Across ranks the steps descend the global batch's loss, the mean of the ranks' own:
    // one rank's loss on its own slice may rise while the mean falls.
    if (ranks() > 1) loss = world_->sum(loss) / ranks();
    if (step_->steps_taken() > before) losses.push_back(loss);
  }
  if (losses.size() < 3)
    return fail(fmt::format("loss scaling skipped {} steps in a row", kMaxAttempts));
  const double chance = chance_loss();
  if (!std::isfinite(losses[0]) || losses[0] < 0.5 * chance || losses[0] > 3 * chance)
    return fail(
        fmt::format("initial loss {} is not {} = {:.3f}", losses[0], chance_description(), chance));
  if (!(losses.back() < losses.front()))
    return fail(fmt::format("loss did not fall on a fixed batch: {}", fmt::join(losses, ", ")));
  std::vector<NamedTensor> grads;
  if (status = step_->gradients(&grads); !status.ok()) return fail(status.message());
  for (const NamedTensor& grad : grads) {
    const Validation finite = check_finite_and_nonzero(grad.values);
    if (!finite.passed) return fail(fmt::format("gradient of {}: {}", grad.name, finite.message));
  }
  losses_ = losses;
  return true;
}

nlohmann::json TrainingWorkload::layer_ceilings() const {
  nlohmann::json ceilings = {
      {"method",
       fmt::format("each layer's product ops (GEMM, convolution, fully connected, attention) "
                   "timed in the step (median over the instrumented steps) and alone on their "
                   "own warm buffers with seeded data (median of {} after one warm-up); "
                   "furthest: the layers losing the most time in the step against alone",
                   StandaloneTiming{}.reps)}};
  if (!alone_error_.empty()) {
    ceilings["error"] = alone_error_;
    return ceilings;
  }
  struct Lost {
    double seconds;
    std::size_t layer;
  };
  std::vector<Lost> lost;
  double in_step = 0, alone = 0;
  for (std::size_t l = 0; l < breakdown_.layers.size() && l < alone_s_.size(); ++l) {
    const LayerTime& layer = breakdown_.layers[l];
    if (layer.product_flops <= 0 || alone_s_[l] <= 0) continue;
    in_step += layer.product_s, alone += alone_s_[l];
    lost.push_back({layer.product_s - alone_s_[l], l});
  }
  std::sort(lost.begin(), lost.end(),
            [](const Lost& a, const Lost& b) { return a.seconds > b.seconds; });
  nlohmann::json furthest = nlohmann::json::array();
  for (std::size_t i = 0; i < lost.size() && i < 5; ++i) {
    const LayerTime& layer = breakdown_.layers[lost[i].layer];
    const double alone_s = alone_s_[lost[i].layer];
    furthest.push_back({{"layer", layer.name},
                        {"kind", layer.kind},
                        {"gflops", layer.product_flops / layer.product_s * 1e-9},
                        {"alone_gflops", layer.product_flops / alone_s * 1e-9},
                        {"step_rate_over_alone", alone_s / layer.product_s},
                        {"lost_s", lost[i].seconds}});
  }
  ceilings["products_s"] = in_step;
  ceilings["products_alone_s"] = alone;
  ceilings["furthest"] = furthest;
  return ceilings;
}

// The loss check's instrumented steps (as many on every rank: the loss is the ranks' mean):
// their medians and spreads; then each product op alone.
Status TrainingWorkload::time_layers() {
  breakdown_ = median_breakdown(breakdown_steps_, &breakdown_spread_);
  const Status alone = time_product_ops_alone(*backend_, step_->product_ops(),
                                              breakdown_.layers.size(), seed_, {}, &alone_s_);
  if (!alone.ok()) {
    alone_s_.clear();
    alone_error_ = alone.message();
  }
  return Status::Ok();
}

Validation TrainingWorkload::validate() {
  Validation result;
  // A whole low-precision step drifts from f64 by more than its ops do (rounding amplified
  // through the network): f32 and f64 steps only; the others' ops are checked one by one.
  const bool whole_step_check =
      step_options_.dtype == DType::f32 || step_options_.dtype == DType::f64;
  const ReducedCase reduced = reduced_case(seed_);
  result.method = fmt::format(
      "{}: every op of a step, casts and update included, against f64 on its own inputs "
      "(relative L2; f32 1e-4, bf16 2e-2, f16 and TF32 products 5e-3; casts exact; updates by "
      "their change){}; the measured architecture at batch {}: the same op by op on one step, "
      "products larger than 2^20 multiply-adds on {} sampled outputs each; at the measured "
      "batch, the products (whose kernels the shape picks) on the same samples, attention in "
      "full; loss finite, {} and falling over 3 applied "
      "steps on the fixed batch (steps skipped by loss scaling not counted; across ranks the "
      "mean of the ranks' losses, the global batch's), gradients finite "
      "and non-zero{}",
      reduced.description,
      whole_step_check ? fmt::format(", every parameter gradient against a whole f64 step ({:g})",
                                     reduced.gradient_tolerance)
                       : "",
      kSmallBatch, OpCheckOptions{}.samples, chance_description(),
      ranks() > 1 ? fmt::format("; {} ranks: {}", ranks(), data_parallel_method()) : "");
  // The later stages exchange between the ranks: every rank learns whether any failed first.
  auto all_passed = [&](bool passed) {
    if (ranks() > 1 && world_->max(passed ? 0.0 : 1.0) > 0 && passed) {
      result.message = "the validation failed on another rank";
      return false;
    }
    return passed;
  };
  if (!all_passed(check_reduced_ops(reduced, &result))) return result;
  if (!all_passed(check_small_batch_ops(&result))) return result;
  if (!all_passed(check_measured_ops(&result))) return result;
  if (whole_step_check && !all_passed(check_reduced_gradients(reduced, &result))) return result;
  if (ranks() > 1 && !all_passed(check_data_parallel(&result))) return result;
  if (!all_passed(check_losses(&result))) return result;
  if (ranks() > 1) {
    std::string different;
    const Status status = compare_weights_across_ranks(*world_, *step_, &different);
    if (!status.ok() || !different.empty()) {
      result.message = status.ok() ? fmt::format(
                                         "after the validation steps the ranks' weights "
                                         "differ (first: {})",
                                         different)
                                   : status.message();
      return result;
    }
  }
  result.passed = true;
  return result;
}

Status TrainingWorkload::time_breakdown() {
  TB_RETURN_IF_ERROR(time_layers());
  if (ranks() == 1) return Status::Ok();
  return time_data_parallel().with_prefix("data-parallel timings: ");
}

std::string TrainingWorkload::implementation() const {
  return step_implementation(step_.get());
}

std::vector<ReferenceKernelUse> TrainingWorkload::reference_kernels() const {
  return step_reference_kernels(step_.get(), breakdown_.total_s > 0 ? &breakdown_ : nullptr);
}

std::string TrainingWorkload::math_mode() const {
  return training_math_mode(step_options_.dtype);
}

nlohmann::json TrainingWorkload::details() const {
  nlohmann::json d;
  d["parameters"] = network_.parameter_count();
  d["forward_macs_per_sample"] = network_.forward_macs_per_sample();
  d["flops_per_sample"] = training_flops_per_sample(network_);
  d["flop_convention"] = "training step = 3 x forward, 2 FLOPs per multiply-accumulate";
  d["memory_bytes"] = step_ ? step_->memory_bytes() : 0;
  nlohmann::json optimizer = {{"kind", optimizer_name(step_options_.optimizer)},
                              {"learning_rate", settings_.learning_rate},
                              {"weight_decay", settings_.weight_decay}};
  if (step_options_.optimizer == OptimizerKind::sgd_momentum) {
    optimizer["momentum"] = settings_.momentum;
  } else {
    optimizer["beta1"] = settings_.beta1;
    optimizer["beta2"] = settings_.beta2;
    optimizer["epsilon"] = settings_.epsilon;
  }
  if (step_) {
    optimizer["state_bytes"] = step_->optimizer_state_bytes();
    optimizer["state_bytes_per_parameter"] = static_cast<double>(step_->optimizer_state_bytes()) /
                                             static_cast<double>(network_.parameter_count());
  }
  d["optimizer"] = optimizer;
  d["validation_losses"] = losses_;
  d["small_batch_check"] = small_batch_check_.to_json();
  if (network_.batch > kSmallBatch) d["measured_network_check"] = measured_check_.to_json();
  d["precision"] = precision_description();
  if (step_ && step_->loss_scale()) d["loss_scaling"] = loss_scale_details(*step_->loss_scale());
  nlohmann::json layers = nlohmann::json::array();
  double sum_of_medians = 0;
  for (std::size_t l = 0; l < breakdown_.layers.size(); ++l) {
    const LayerTime& layer = breakdown_.layers[l];
    sum_of_medians += layer.forward_s + layer.backward_s;
    layers.push_back({{"layer", layer.name},
                      {"kind", layer.kind},
                      {"forward_s", layer.forward_s},
                      {"backward_s", layer.backward_s},
                      {"spread_s", breakdown_spread_.layer_s.at(l)},
                      {"implementations", layer.implementations}});
    if (layer.product_flops > 0) {  // its GEMMs, convolutions or attention, in the step and alone
      nlohmann::json& entry = layers.back();
      entry["product_flops"] = layer.product_flops;
      entry["product_s"] = layer.product_s;
      entry["product_gflops"] = layer.product_flops / layer.product_s * 1e-9;
      if (!alone_s_.empty()) {
        entry["alone_s"] = alone_s_.at(l);
        entry["alone_gflops"] = layer.product_flops / alone_s_.at(l) * 1e-9;
      }
    }
  }
  d["breakdown"] = {
      {"method", fmt::format("the validation's {} steps on the fixed batch, instrumented: "
                             "waiting after every op, each figure the median over them, each "
                             "spread the interquartile range",
                             breakdown_steps_.size())},
      {"steps", breakdown_steps_.size()},
      {"total_s", breakdown_.total_s},
      {"total_spread_s", breakdown_spread_.total_s},
      {"sum_of_layer_medians_s", sum_of_medians},
      {"optimizer_s", breakdown_.optimizer_s},
      {"weight_cast_s", breakdown_.weight_cast_s},
      {"layers", layers},
      {"layer_ceilings", layer_ceilings()}};
  if (!data_parallel_.is_null()) d["data_parallel"] = data_parallel_;
  add_details(d);
  return d;
}

}  // namespace tb
