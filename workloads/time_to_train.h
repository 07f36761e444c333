// What every time-to-train workload shares: the learning-rate schedules, the MLPerf aggregate
// over runs, a run's record (its quality curve), and the runs themselves
// (TimeToTrainWorkload): each timed from the first touch of the data to the first evaluation
// at the target, as MLPerf times them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/network.h"
#include "models/training_step.h"
#include "workloads/workload.h"

namespace tb {

// torch.optim.lr_scheduler.OneCycleLR with its defaults: cosine warm-up over the first 30%
// of `total_steps` from peak / 25 to peak, cosine decay to peak / 25e4, momentum cycled
// inversely between 0.95 and 0.85.
struct OneCycle {
  double peak_lr = 0.1;
  std::int64_t total_steps = 1;
  double learning_rate(std::int64_t step) const;
  double momentum(std::int64_t step) const;
};

// BERT's schedule: linear warm-up from 0 to the peak over `warmup_steps`, then linear decay
// to 0 at `total_steps`.
struct LinearWarmupDecay {
  double peak_lr = 1e-3;
  std::int64_t warmup_steps = 0, total_steps = 1;
  double learning_rate(std::int64_t step) const;
};

struct CurvePoint {
  double time_s = 0;  // since the clock started
  std::int64_t samples = 0;
  double epoch = 0;
  double quality = 0;  // accuracy on the evaluation set
};

struct TrainingRun {
  std::uint64_t seed = 0;
  bool converged = false;
  double time_to_train_s = 0;  // when converged: to the first evaluation at the target
  double data_load_s = 0, evaluation_s = 0, training_s = 0;
  std::int64_t samples = 0, steps = 0;
  std::vector<CurvePoint> curve;
  nlohmann::json to_json() const;
};

// MLPerf's aggregate of the runs' times: a run that missed the target counts as infinitely
// slow; with 3 or more runs the fastest and the slowest are dropped and the rest averaged (with
// fewer, all are). nullopt when the aggregate is infinite: with 3 or more runs, more than one
// missed; with fewer, any missed. Such a case fails.
std::optional<double> mlperf_aggregate(const std::vector<TrainingRun>& runs);

struct TimeToTrainBudget {
  double target = 0.9;  // the quality that ends a run
  std::int64_t batch = 128, epochs = 3, runs = 1;
  std::int64_t evaluations_per_epoch = 2;
  DType dtype = DType::f32;
  double peak_lr = 0.1;
};

// The keys every time-to-train descriptor has (target batch dtype epochs lr runs), first in
// its kind's table, their defaults from `defaults`.
std::vector<KeySpec> budget_keys(const TimeToTrainBudget& defaults);
// Reads them (the rest of the budget from `defaults`); throws UsageError for a target outside
// (0, 1].
TimeToTrainBudget read_budget(DescriptorReader& reader, const TimeToTrainBudget& defaults);

// A time-to-train workload: `runs` runs with successive seeds, each from freshly initialized
// weights, timed from the first touch of the data (load_data) to the first evaluation that
// reaches the target, evaluation included; setup (planning, allocation) is initialization,
// reported separately. An epoch is the training examples in a seeded shuffled order, the
// partial last batch dropped. A run that does not reach the target within its epoch budget
// is reported as such, not as a time. A dataset and model supply the hooks. Across several
// ranks training is data parallel (training_workload.h): `batch` examples per rank per step, an
// epoch the steps of the global batch (ranks x batch, rank r taking the r-th share of each),
// the learning-rate schedule unchanged (the descriptor's lr is the global batch's: no
// rescaling), the quality rank 0's (its running statistics, as DDP broadcasts rank 0's).
class TimeToTrainWorkload : public Workload {
 public:
  DType dtype() const override { return budget_.dtype; }
  Headline headline() const override;                // seconds to train (details' time_to_train_s)
  WorkCounts counts() const override { return {}; }  // the figure is a time, not a rate
  std::uint64_t device_bytes() const override;
  bool times_itself() const override { return true; }
  std::vector<double> own_samples() const override;  // each converged run's time
  void join(World& world) override { world_ = &world; }
  Status setup(Backend& backend, std::uint64_t seed) override;
  // Before any run: every op of a training step (its update included) and of an evaluation
  // step of check_network(), then of a training step of the measured network, against f64 on
  // its own seeded inputs; during the runs, the quality itself.
  Validation validate() override;
  Status run() override;
  std::string implementation() const override;
  std::string math_mode() const override;
  // The training step's and the evaluation step's (no time shares: runs are not instrumented).
  std::vector<ReferenceKernelUse> reference_kernels() const override;
  bool emulates_bf16() const override;
  nlohmann::json details() const override;

 protected:
  TimeToTrainWorkload(const TimeToTrainBudget& budget, Network train_network, Network eval_network,
                      StepOptions options);

  // A small network of the same layers for the op check, and what it is.
  virtual Network check_network() const = 0;
  virtual std::string check_description() const = 0;
  // Reads the data (inside the clock: the first touch), then how many training examples an
  // epoch has.
  virtual Status load_data() = 0;
  virtual std::int64_t training_examples() const = 0;
  // The training examples `rows` as a batch; `seed` is the step's (BERT's masking draws it).
  virtual std::vector<NamedTensor> training_batch(const std::int64_t* rows, std::int64_t count,
                                                  std::uint64_t seed) const = 0;
  // The quality of `eval`'s weights (the training step's, copied) on the evaluation set.
  virtual Status evaluate(TrainingStep& eval, double* quality) = 0;
  virtual OptimizerSettings optimizer_settings(std::int64_t step,
                                               std::int64_t total_steps) const = 0;
  virtual std::string quality_name() const = 0;  // "test accuracy"
  // The model, dataset and recipe.
  virtual void add_details(nlohmann::json& details) const = 0;

  const TimeToTrainBudget& budget() const { return budget_; }
  // The budget keys' values, for canonical_descriptor.
  std::map<std::string, std::string> budget_values() const;
  const Network& train_network() const { return train_network_; }

 private:
  StepOptions eval_options() const;  // the training options, forward only
  Validation validate_ops();         // validate()'s checks on this rank
  Status train_once(std::uint64_t seed, TrainingRun* run);
  // The quality of the training step's weights: rank 0's evaluation, shared with every rank.
  Status evaluate_on_rank_zero(double* quality);
  int ranks() const { return world_ ? world_->size() : 1; }
  double best_quality() const;

  TimeToTrainBudget budget_;
  Network train_network_, eval_network_;
  StepOptions options_;
  Backend* backend_ = nullptr;
  std::uint64_t seed_ = 0;
  std::unique_ptr<TrainingStep> train_, eval_;
  double init_s_ = 0;
  std::vector<TrainingRun> runs_;
  World* world_ = nullptr;
  std::unique_ptr<Communicator> communicator_;  // across ranks only
};

// A seeded permutation of [0, count) (Fisher-Yates on splitmix64 draws).
std::vector<std::int64_t> shuffled(std::int64_t count, std::uint64_t seed);

}  // namespace tb
