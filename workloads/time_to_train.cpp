#include "workloads/time_to_train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>

#include <fmt/format.h>

#include "models/data_parallel.h"
#include "models/reference_check.h"
#include "models/training_memory.h"
#include "workloads/training_workload.h"

namespace tb {
namespace {

constexpr double kWarmupFraction = 0.3, kDivFactor = 25, kFinalDivFactor = 1e4;
constexpr double kBaseMomentum = 0.85, kMaxMomentum = 0.95;

double cosine(double start, double end, double fraction) {
  return end + (start - end) / 2.0 * (1.0 + std::cos(std::numbers::pi * fraction));
}

// The phase a step is in and how far through it (PyTorch's phase boundaries).
template <typename Warmup, typename Decay>
double one_cycle(std::int64_t total_steps, std::int64_t step, Warmup warmup, Decay decay) {
  const double warmup_end = kWarmupFraction * static_cast<double>(total_steps) - 1;
  const double last = static_cast<double>(total_steps) - 1;
  const double s = static_cast<double>(std::min(step, total_steps - 1));
  if (s <= warmup_end) return warmup(s / warmup_end);
  return decay((s - warmup_end) / (last - warmup_end));
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Status copy_state(TrainingStep& from, TrainingStep& to) {
  std::vector<NamedTensor> state;
  TB_RETURN_IF_ERROR(from.state(&state));
  return to.load_state(state);
}

}  // namespace

double OneCycle::learning_rate(std::int64_t step) const {
  const double initial = peak_lr / kDivFactor, final_lr = initial / kFinalDivFactor;
  return one_cycle(
      total_steps, step, [&](double f) { return cosine(initial, peak_lr, f); },
      [&](double f) { return cosine(peak_lr, final_lr, f); });
}

double OneCycle::momentum(std::int64_t step) const {
  return one_cycle(
      total_steps, step, [](double f) { return cosine(kMaxMomentum, kBaseMomentum, f); },
      [](double f) { return cosine(kBaseMomentum, kMaxMomentum, f); });
}

double LinearWarmupDecay::learning_rate(std::int64_t step) const {
  const auto s = static_cast<double>(step);
  if (step < warmup_steps) return peak_lr * (s + 1) / static_cast<double>(warmup_steps);
  const double left = static_cast<double>(total_steps - step);
  return std::max(0.0, peak_lr * left / static_cast<double>(total_steps - warmup_steps));
}

nlohmann::json TrainingRun::to_json() const {
  nlohmann::json points = nlohmann::json::array();
  for (const CurvePoint& p : curve)
    points.push_back(
        {{"time_s", p.time_s}, {"samples", p.samples}, {"epoch", p.epoch}, {"quality", p.quality}});
  nlohmann::json j = {
      {"seed", seed},
      {"converged", converged},
      {"data_load_s", data_load_s},
      {"training_s", training_s},
      {"evaluation_s", evaluation_s},
      {"samples", samples},
      {"steps", steps},
      {"training_samples_per_s", training_s > 0 ? static_cast<double>(samples) / training_s : 0.0},
      {"curve", points}};
  if (converged) j["time_to_train_s"] = time_to_train_s;
  return j;
}

std::optional<double> mlperf_aggregate(const std::vector<TrainingRun>& runs) {
  std::vector<double> times;  // a run that missed the target took forever
  for (const TrainingRun& run : runs)
    times.push_back(run.converged ? run.time_to_train_s : std::numeric_limits<double>::infinity());
  if (times.empty()) return std::nullopt;
  std::sort(times.begin(), times.end());
  if (times.size() >= 3) times = std::vector<double>(times.begin() + 1, times.end() - 1);
  const double mean =
      std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  if (!std::isfinite(mean)) return std::nullopt;
  return mean;
}

std::vector<std::int64_t> shuffled(std::int64_t count, std::uint64_t seed) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(count));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  for (std::int64_t i = count - 1; i > 0; --i)
    std::swap(
        order[i],
        order[mix64(seed + static_cast<std::uint64_t>(i)) % static_cast<std::uint64_t>(i + 1)]);
  return order;
}

std::vector<KeySpec> budget_keys(const TimeToTrainBudget& defaults) {
  return {
      number_key("target", fmt::format("{:g}", defaults.target), "the quality that ends a run",
                 {.min = 0, .max = 1, .min_excluded = true}),
      integer_key("batch", std::to_string(defaults.batch),
                  "training examples per step (per rank across several ranks)", 1, kLargestBatch),
      choice_key("dtype", std::string(dtype_name(defaults.dtype)), {"f32", "bf16"},
                 "the step's precision"),
      integer_key("epochs", std::to_string(defaults.epochs), "the epoch budget of a run", 1,
                  10'000),
      number_key("lr", fmt::format("{:g}", defaults.peak_lr), "peak learning rate", kLearningRate),
      integer_key("runs", std::to_string(defaults.runs),
                  "runs with successive seeds (MLPerf's aggregate over 3 or more); --runs sets it",
                  1, 1000)};
}

TimeToTrainBudget read_budget(DescriptorReader& reader, const TimeToTrainBudget& defaults) {
  TimeToTrainBudget budget = defaults;
  budget.target = reader.number("target");
  budget.batch = reader.integer("batch");
  budget.dtype = parse_dtype(reader.choice("dtype"));
  budget.epochs = reader.integer("epochs");
  budget.peak_lr = reader.number("lr");
  budget.runs = reader.integer("runs");
  return budget;
}

Headline TimeToTrainWorkload::headline() const {
  return {"time_to_train_s", "s",
          fmt::format("time to train {} {}", descriptor().kind(), dtype_name(dtype())), true};
}

std::map<std::string, std::string> TimeToTrainWorkload::budget_values() const {
  return {
      {"target", fmt::format("{:g}", budget_.target)},   {"batch", std::to_string(budget_.batch)},
      {"dtype", std::string(dtype_name(budget_.dtype))}, {"epochs", std::to_string(budget_.epochs)},
      {"lr", fmt::format("{:g}", budget_.peak_lr)},      {"runs", std::to_string(budget_.runs)}};
}

TimeToTrainWorkload::TimeToTrainWorkload(const TimeToTrainBudget& budget, Network train_network,
                                         Network eval_network, StepOptions options)
    : budget_(budget),
      train_network_(std::move(train_network)),
      eval_network_(std::move(eval_network)),
      options_(options) {}

StepOptions TimeToTrainWorkload::eval_options() const {
  StepOptions options = options_;
  options.evaluation = true;
  return options;
}

std::uint64_t TimeToTrainWorkload::device_bytes() const {
  return estimate_training_bytes(train_network_, options_) +
         estimate_training_bytes(eval_network_, eval_options());
}

std::vector<double> TimeToTrainWorkload::own_samples() const {
  std::vector<double> samples;
  for (const TrainingRun& run : runs_)
    if (run.converged) samples.push_back(run.time_to_train_s);
  return samples;
}

// Initialization, outside the timed region: both steps planned and allocated.
Status TimeToTrainWorkload::setup(Backend& backend, std::uint64_t seed) {
  const auto start = Clock::now();
  backend_ = &backend;
  seed_ = seed;
  if (ranks() > 1) {
    TB_RETURN_IF_ERROR(backend.make_communicator(*world_, &communicator_));
    options_.data_parallel_ranks = ranks();
    options_.dropout_seed = rank_dropout_seed(options_.dropout_seed, world_->rank());
  }
  TB_RETURN_IF_ERROR(TrainingStep::create(backend, train_network_, options_, &train_));
  TB_RETURN_IF_ERROR(TrainingStep::create(backend, eval_network_, eval_options(), &eval_));
  if (communicator_) TB_RETURN_IF_ERROR(train_->exchange_gradients(communicator_.get()));
  init_s_ = seconds_since(start);
  return Status::Ok();
}

Validation TimeToTrainWorkload::validate() {
  Validation result = validate_ops();
  // The runs exchange gradients: a rank whose check failed must not leave the others waiting.
  if (ranks() > 1 && world_->max(result.passed ? 0.0 : 1.0) > 0 && result.passed) {
    result.passed = false;
    result.message = "the validation failed on another rank";
  }
  return result;
}

Validation TimeToTrainWorkload::validate_ops() {
  Validation result;
  result.method = fmt::format(
      "every op of a training step (casts and update included) and of an evaluation step ({}, "
      "seeded inputs), then of a training step of the measured network at its batch (products "
      "larger than 2^20 multiply-adds on {} sampled outputs each), against f64 on its own "
      "inputs (relative L2; f32 1e-4, bf16 2e-2; casts exact; updates by their change); during "
      "the runs, {}",
      check_description(), OpCheckOptions{}.samples, quality_name());
  const OpCheckOptions with_update{.update = optimizer_settings(0, 1)};
  const OpCheckOptions measured_options = OpCheckOptions::measured_network(*with_update.update);
  const Network net = check_network();
  const std::vector<NamedTensor> batch = seeded_batch(net, seed_);
  std::unique_ptr<TrainingStep> train, eval, measured;
  Status status = prepared_step(*backend_, net, options_, batch, seed_, &train);
  if (status.ok()) status = prepared_step(*backend_, net, eval_options(), batch, seed_, &eval);
  // A step of its own: the runs' step keeps its loss scale and counters untouched.
  if (status.ok())
    status = prepared_step(*backend_, train_network_, options_, seeded_batch(train_network_, seed_),
                           seed_, &measured);
  for (TrainingStep* step : {train.get(), eval.get(), measured.get()}) {
    OpCheck check;
    if (status.ok() && step == eval.get()) status = copy_state(*train, *eval);
    const OpCheckOptions options = step == eval.get()       ? OpCheckOptions{}
                                   : step == measured.get() ? measured_options
                                                            : with_update;
    if (status.ok()) status = step->check_ops(&check, options);
    if (!status.ok()) {
      result.message = status.message();
      return result;
    }
    if (!fold_op_check(check, &result)) return result;
  }
  result.passed = true;
  return result;
}

Status TimeToTrainWorkload::run() {
  runs_.clear();
  for (std::int64_t r = 0; r < budget_.runs; ++r) {
    const std::uint64_t seed = seed_ + static_cast<std::uint64_t>(r);
    TB_RETURN_IF_ERROR(train_->initialize_parameters(seed));  // before the clock starts
    TrainingRun run;
    TB_RETURN_IF_ERROR(train_once(seed, &run));
    runs_.push_back(std::move(run));
  }
  const auto missed = static_cast<std::int64_t>(runs_.size() - own_samples().size());
  if (!mlperf_aggregate(runs_))
    return Status::Failed(fmt::format("{} of {} runs missed {} {:g}% within {} epochs (best: "
                                      "{:.2f}%); a missed run counts as "
                                      "infinitely slow, so the aggregate is infinite",
                                      missed, runs_.size(), quality_name(), 100 * budget_.target,
                                      budget_.epochs, 100 * best_quality()))
        .because(ReasonCode::target_missed);
  return Status::Ok();
}

std::string TimeToTrainWorkload::implementation() const {
  return step_implementation(train_.get());
}
std::vector<ReferenceKernelUse> TimeToTrainWorkload::reference_kernels() const {
  std::vector<ReferenceKernelUse> uses = step_reference_kernels(train_.get(), nullptr);
  for (ReferenceKernelUse& use : step_reference_kernels(eval_.get(), nullptr)) {
    use.op = "evaluation " + use.op;
    uses.push_back(use);
  }
  return uses;
}

bool TimeToTrainWorkload::emulates_bf16() const {
  return (train_ && train_->emulates_bf16()) || (eval_ && eval_->emulates_bf16());
}

std::string TimeToTrainWorkload::math_mode() const {
  return training_math_mode(budget_.dtype);
}

double TimeToTrainWorkload::best_quality() const {
  double best = 0;
  for (const TrainingRun& run : runs_)
    for (const CurvePoint& p : run.curve) best = std::max(best, p.quality);
  return best;
}

Status TimeToTrainWorkload::train_once(std::uint64_t seed, TrainingRun* run) {
  run->seed = seed;
  const auto start = Clock::now();
  TB_RETURN_IF_ERROR(load_data());
  run->data_load_s = seconds_since(start);
  const std::int64_t global_batch = budget_.batch * ranks();
  const std::int64_t steps_per_epoch = training_examples() / global_batch;  // partial dropped
  if (steps_per_epoch < budget_.evaluations_per_epoch)
    return Status::InvalidArgument(fmt::format(
        "{} training examples make {} batches of {}: fewer than the {} evaluations "
        "an epoch needs",
        training_examples(), steps_per_epoch, global_batch, budget_.evaluations_per_epoch));
  // This rank's share of each global batch.
  const std::int64_t share = budget_.batch * (world_ ? world_->rank() : 0);
  const std::int64_t total_steps = steps_per_epoch * budget_.epochs;
  const std::int64_t eval_every = steps_per_epoch / budget_.evaluations_per_epoch;
  for (std::int64_t epoch = 0; epoch < budget_.epochs && !run->converged; ++epoch) {
    const std::vector<std::int64_t> order = shuffled(
        training_examples(), mix64(seed * kGoldenGamma + static_cast<std::uint64_t>(epoch)));
    for (std::int64_t s = 0; s < steps_per_epoch && !run->converged; ++s) {
      const auto step_start = Clock::now();
      const std::uint64_t step_seed = mix64(seed ^ mix64(static_cast<std::uint64_t>(run->steps)));
      TB_RETURN_IF_ERROR(train_->set_batch(
          training_batch(order.data() + s * global_batch + share, budget_.batch, step_seed)));
      TB_RETURN_IF_ERROR(train_->run(/*update=*/true, optimizer_settings(run->steps, total_steps)));
      run->training_s += seconds_since(step_start);
      ++run->steps;
      run->samples += global_batch;
      if ((s + 1) % eval_every != 0) continue;
      const auto eval_start = Clock::now();
      double quality = 0;
      TB_RETURN_IF_ERROR(evaluate_on_rank_zero(&quality));
      run->evaluation_s += seconds_since(eval_start);
      const double elapsed = seconds_since(start);
      run->curve.push_back({elapsed, run->samples,
                            static_cast<double>(run->steps) / static_cast<double>(steps_per_epoch),
                            quality});
      if (quality >= budget_.target) {
        run->converged = true;
        run->time_to_train_s = elapsed;
      }
    }
  }
  return Status::Ok();
}

Status TimeToTrainWorkload::evaluate_on_rank_zero(double* quality) {
  *quality = 0;
  if (!world_ || world_->rank() == 0) {
    TB_RETURN_IF_ERROR(copy_state(*train_, *eval_));
    TB_RETURN_IF_ERROR(evaluate(*eval_, quality));
  }
  // Every rank's weights are the same, their running statistics not: rank 0's decide for all.
  return ranks() > 1 ? world_->broadcast_bytes(quality, sizeof(*quality), 0) : Status::Ok();
}

nlohmann::json TimeToTrainWorkload::details() const {
  nlohmann::json runs = nlohmann::json::array();
  std::int64_t converged = 0;
  for (const TrainingRun& run : runs_) {
    runs.push_back(run.to_json());
    converged += run.converged;
  }
  nlohmann::json d = {
      {"parameters", train_network_.parameter_count()},
      {"definition",
       "MLPerf's: wall clock from the first touch of the training data (reading the files) "
       "to the first evaluation at the target, evaluation included; initialization "
       "(planning, allocation, weight init) separate; a partial last batch is dropped"},
      {"target", budget_.target},
      {"quality", quality_name()},
      {"batch", budget_.batch},
      {"epoch_budget", budget_.epochs},
      {"evaluations_per_epoch", budget_.evaluations_per_epoch},
      {"initialization_s", init_s_},
      {"runs", runs},
      {"runs_converged", converged},
      {"runs_missed", static_cast<std::int64_t>(runs_.size()) - converged},
      {"runs_attempted", static_cast<std::int64_t>(runs_.size())},
      {"aggregate", runs_.size() >= 3
                        ? "MLPerf: a missed run counts as infinitely slow; fastest and slowest "
                          "dropped, mean of the rest (infinite with more than one miss)"
                        : "mean of the runs, a missed run infinitely slow (MLPerf drops the "
                          "fastest and slowest of 3 or more)"}};
  if (const auto aggregate = mlperf_aggregate(runs_)) d["time_to_train_s"] = *aggregate;
  if (ranks() > 1) {
    d["data_parallel"] = data_parallel_batches(ranks(), budget_.batch);
    d["data_parallel"].update(
        {{"learning_rate_rule",
          "kept: the descriptor's lr schedule is the global batch's, not rescaled by the rank "
          "count (the recipe at N ranks is the single-process recipe at batch N x batch)"},
         {"evaluation",
          "rank 0's weights and running statistics (batch norm per rank, as DDP "
          "without SyncBatchNorm; DDP broadcasts rank 0's buffers)"}});
  }
  add_details(d);
  return d;
}

}  // namespace tb
