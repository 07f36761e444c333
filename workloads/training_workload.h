// What every model-training workload (resnet50-train, bert-train) shares: a TrainingStep run
// back to back on a fixed seeded batch, validated before it is timed, reported with its
// memory, optimizer and per-layer breakdown. A model supplies its networks, batches and the
// facts only it knows. Across several ranks the step is data parallel (models/data_parallel.h):
// each rank steps on its own batch of the descriptor's size, the gradients averaged in buckets
// while backward runs, the optimizer on every rank.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/network.h"
#include "models/step_breakdown.h"
#include "models/training_memory.h"
#include "models/training_step.h"
#include "workloads/descriptor.h"
#include "workloads/keys.h"
#include "workloads/workload.h"

namespace tb {

class TrainingWorkload : public Workload {
 public:
  DType dtype() const override { return step_options_.dtype; }
  Headline headline() const override;  // samples/s, the best per kind and dtype
  WorkCounts counts() const override;  // across ranks: the global batch
  std::uint64_t device_bytes() const override;
  // What the step needs, part by part (models/training_memory.h), for the capacity planner.
  TrainingMemory memory_parts() const;
  void join(World& world) override { world_ = &world; }
  Status setup(Backend& backend, std::uint64_t seed) override;
  Status run() override { return step_->run(/*update=*/true, settings_); }
  // Untimed: (1) on the reduced network, then on the measured architecture at kSmallBatch, every
  // op of one step against the same op in f64 fed the step's own inputs (tight: no
  // amplification through the network), and at the measured batch its product ops on sampled
  // elements; (2) for fp32, the reduced network's every parameter gradient against a whole f64
  // step (catches wiring errors); (3) on the measured network, three steps on the fixed batch
  // give a finite loss near chance that falls, and finite, non-zero gradients; (4) those steps,
  // instrumented, give the per-layer breakdown, with each layer's product ops timed alone.
  // Across ranks also: (5) the
  // reduced network stepped data parallel on each rank's slice of one global batch against one
  // process stepping on each slice alone (gradients averaged), and every rank's weights bitwise
  // equal after it and after (3); (6) the timings of the data-parallel details (overlap on and off,
  // the step without communication, the communication alone), after which the step starts again
  // from the seed's weights, checked bitwise equal on every rank. A stage that fails on any rank
  // fails on all.
  Validation validate() override;
  // The per-layer breakdown from validate()'s instrumented steps, each product op alone, and
  // across ranks the data-parallel timings (6 above).
  Status time_breakdown() override;
  std::string implementation() const override;
  std::string math_mode() const override;
  std::vector<ReferenceKernelUse> reference_kernels() const override;
  bool emulates_bf16() const override { return step_ && step_->emulates_bf16(); }
  nlohmann::json details() const override;

 protected:
  TrainingWorkload(Network network, StepOptions step_options, OptimizerSettings settings,
                   BucketOptions buckets = {})
      : network_(std::move(network)),
        step_options_(step_options),
        settings_(settings),
        buckets_(buckets) {}

  struct ReducedCase {
    Network network;
    std::vector<NamedTensor> batch;
    std::string description;    // "reduced ResNet (64x64, batch 4, ...)"
    double gradient_tolerance;  // relative L2, worst parameter, whole step against f64
  };
  // At `ranks` times the reduced network's batch: the global batch of a data-parallel check.
  virtual ReducedCase reduced_case(std::uint64_t seed, int ranks = 1) const = 0;
  // The measured architecture at kSmallBatch, with its seeded batch: every layer shape of the
  // measured network, at a cost that does not grow with the measured batch.
  struct SmallBatchCase {
    Network network;
    std::vector<NamedTensor> batch;
  };
  static constexpr std::int64_t kSmallBatch = 2;
  virtual SmallBatchCase small_batch_case(std::uint64_t seed) const = 0;
  virtual std::vector<NamedTensor> batch(std::uint64_t seed) const = 0;
  // The loss of random weights (ln of the class count, summed over the loss layers), and how
  // far the first loss may be from it.
  virtual double chance_loss() const = 0;
  virtual std::string chance_description() const = 0;
  // What a mixed-precision step keeps in the low-precision dtype and what in fp32, in the
  // model's words ("activations and convolutions"; "master weights, ...").
  struct MixedPrecisionParts {
    std::string low_precision, fp32;
  };
  virtual MixedPrecisionParts mixed_precision_parts() const = 0;
  std::string precision_description() const;
  // The model's own entries (name, FLOP convention, sweep, ...).
  virtual void add_details(nlohmann::json& details) const = 0;

  const Network& network() const { return network_; }
  const StepOptions& step_options() const { return step_options_; }
  const OptimizerSettings& settings() const { return settings_; }
  const TrainingStep* step() const { return step_.get(); }
  int ranks() const { return world_ ? world_->size() : 1; }

 private:
  // The stages of validate(); each returns whether it passed, the reason in `result`.
  bool check_reduced_ops(const ReducedCase& reduced, Validation* result);
  bool check_small_batch_ops(Validation* result);
  bool check_measured_ops(Validation* result);
  bool check_reduced_gradients(const ReducedCase& reduced, Validation* result);
  bool check_losses(Validation* result);
  bool check_data_parallel(Validation* result);
  Status time_data_parallel();
  std::string data_parallel_method() const;  // how check_data_parallel() validates
  // This rank's step options: the loss gradient averaged over the ranks, its own dropout masks.
  StepOptions rank_options() const;
  // The options of a network only validation runs (reduced, small batch): no timed engine search.
  StepOptions validation_options() const;

  Network network_;
  StepOptions step_options_;
  OptimizerSettings settings_;
  Backend* backend_ = nullptr;
  std::uint64_t seed_ = 0;
  std::unique_ptr<TrainingStep> step_;
  // Where a step's time goes: the medians of check_losses()'s instrumented steps, and spreads.
  std::vector<StepBreakdown> breakdown_steps_;
  Status time_layers();
  StepBreakdown breakdown_;
  BreakdownSpread breakdown_spread_;
  // Per layer, its product ops' time alone (workloads/standalone_ops.h), or why it is missing:
  // a failure there (out of memory beside the step) costs the comparison, not the case.
  std::vector<double> alone_s_;
  std::string alone_error_;
  nlohmann::json layer_ceilings() const;  // the details' entry
  BucketOptions buckets_;
  World* world_ = nullptr;
  std::unique_ptr<Communicator> communicator_;  // across ranks only
  nlohmann::json data_parallel_;                // the details' data_parallel entry
  std::vector<double> losses_;
  // An op-by-op check in validate(): what it cost and covered.
  struct OpCheckRecord {
    double seconds = 0;
    std::int64_t batch = 0;
    std::int64_t ops = 0, ops_sampled = 0, outputs_compared = 0;
    std::string worst_output;
    double worst_error = 0, worst_tolerance = 0;
    nlohmann::json to_json() const;
  };
  // The measured architecture at the small batch (every op), and at the measured batch (its
  // products; absent where the measured batch is the small one).
  bool record_op_check(const std::string& what, TrainingStep& step, std::int64_t batch,
                       const OpCheckOptions& options, OpCheckRecord* record, Validation* result);
  OpCheckRecord small_batch_check_, measured_check_;
};

// The data-parallel keys of every training workload, left out at their defaults: bucket_mb
// (DDP's bucket_cap_mb) and overlap (1: buckets reduced while backward runs; 0: after it).
KeySpec bucket_mb_key();
KeySpec overlap_key();
BucketOptions read_bucket_options(DescriptorReader& reader);
// What every data-parallel case's details start with: world_size, per_rank_batch, global_batch.
nlohmann::json data_parallel_batches(int ranks, std::int64_t per_rank_batch);

// "sgd_momentum", "adamw", "lamb"
std::string optimizer_name(OptimizerKind kind);

// Folds one step's op check into `result`: outputs counted, the worst error relative to its
// tolerance kept, and on failure a message naming the output. Returns check.passed.
bool fold_op_check(const OpCheck& check, Validation* result);

// What a step ran (one line per implementation), and the math mode of a step's dtype: what
// every training workload reports.
std::string step_implementation(const TrainingStep* step);
// The step's reference-kernel ops, each with its share of `breakdown`'s step where one was
// measured (an op that runs several times in a step sums its executions).
std::vector<ReferenceKernelUse> step_reference_kernels(const TrainingStep* step,
                                                       const StepBreakdown* breakdown);
std::string training_math_mode(DType dtype);
// Loss scaling as a report states it: the rule, the final scale and the skipped steps.
nlohmann::json loss_scale_details(const DynamicLossScale& scale);

}  // namespace tb
