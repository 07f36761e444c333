// Runs a Network's training step on one backend: forward, loss, backward and the optimizer
// update, as ops planned once on buffers allocated once (one arena, first touched before any
// step). Activations use the backend's native layout throughout; parameters, their gradients
// and the optimizer state live in flat buffers in the framework's order, so one optimizer op
// updates them all and they load and save by name.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/communicator.h"
#include "models/gradient_buckets.h"
#include "models/network.h"

namespace tb {

// Hyper-parameters of the step's optimizer (StepOptions::optimizer), settable per step.
struct OptimizerSettings {
  float learning_rate = 0.1f;
  float momentum = 0.9f;  // SGD
  float weight_decay = 1e-4f;
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-6f;  // AdamW, LAMB
};

// A named tensor on the host, in double whatever the step's dtype.
struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> dims;
  std::vector<double> values;
  bool integer = false;  // a count or label (num_batches_tracked): stored as I64
};

struct LayerTime {
  std::string name, kind;
  double forward_s = 0, backward_s = 0;
  std::vector<std::string> implementations;  // of the layer's ops, distinct, in planning order
  // The layer's product ops (GEMM, convolution, fully connected, attention; ops.h's
  // product_flops), forward and backward: their work and the time they took in the step.
  double product_flops = 0, product_s = 0;
};
// A product op of the step and the layer it belongs to.
struct LayerProductOp {
  int layer = 0;
  OpDesc desc;
};
// An op of the step whose plan runs a reference kernel, and (in a breakdown) its time.
struct ReferenceOp {
  std::string op;  // "layer4.0.conv2 conv backward"
  std::string implementation;
  double seconds = 0;
};
// Where one step's time goes, from an instrumented step that waits after every op.
struct StepBreakdown {
  std::vector<LayerTime> layers;  // in forward order; backward includes gradient sums
  double optimizer_s = 0;
  double weight_cast_s = 0;  // mixed precision: the compute copy of the weights
  double total_s = 0;
  std::vector<ReferenceOp> reference_ops;  // with the time each took
};

// PyTorch's GradScaler: the loss gradient is multiplied by `scale`; a step whose gradients
// are not all finite is skipped and halves the scale, `growth_interval` applied steps in a row
// double it.
struct DynamicLossScale {
  double scale = 65536.0;
  double growth_factor = 2.0, backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  std::int64_t clean_steps = 0;  // applied in a row since the scale last changed
  std::int64_t skipped_steps = 0;
  // After a step's gradients were checked: whether to apply the update, with the scale
  // adjusted for the next step.
  bool update(bool found_nonfinite);
};

enum class LossScaling {
  by_precision,  // dynamic for f16 (models/precision.h), none otherwise
  none,
  dynamic,
};

struct StepOptions {
  // f32, tf32 (f32 data, TF32 GEMMs and convolutions), bf16 or f16 (mixed:
  // models/precision.h), or f64 (the reference).
  DType dtype = DType::f32;
  Layout layout = Layout::native;
  bool winograd_allowed = false;  // convolutions may use Winograd where the library picks it
  OptimizerKind optimizer = OptimizerKind::sgd_momentum;
  std::uint64_t dropout_seed = 0;  // each dropout layer's mask stream derives from it
  // Forward only, as a model is evaluated: batch norm normalizes with the running statistics,
  // dropout passes its input through, no backward and no optimizer.
  bool evaluation = false;
  LossScaling loss_scaling = LossScaling::by_precision;
  double initial_loss_scale = 65536.0;  // PyTorch's GradScaler default
  // Data parallel: the ranks whose gradients exchange_gradients() sums. The loss gradient is
  // divided by their number (folded into the loss layer's gradient scale, no extra pass), so
  // the sum is the mean over the global batch, as DDP averages.
  int data_parallel_ranks = 1;
  // A step only validation runs (the reduced and small-batch networks): its convolutions take the
  // library's first suitable engine, untimed (ConvOp::first_engine).
  bool validation_only = false;
};

// Every op of a step checked against the same op in f64 (the shared CPU code) fed the step's
// own inputs: arithmetic checked op by op, without the amplification a whole network adds.
struct OpCheck {
  std::int64_t ops_checked = 0, outputs_compared = 0;
  std::int64_t ops_sampled = 0;  // product ops compared on sampled elements only
  double worst_error = 0;        // relative L2 distance of an output from the f64 result
  double worst_tolerance = 0;
  std::string worst_output;  // "layer1.0.conv1 conv diff_src"
  bool passed = false;

  // Counts a compared output, and takes its error as the worst where it is further past its
  // tolerance than the worst so far (or is the first). A NaN error is the worst there is, so a
  // failure names the output that failed, never one that passed.
  void add_output(double error, double tolerance, const std::string& output);
};

// How check_ops() runs. A product op (GEMM, convolution, fully connected) whose f64 reference
// takes more multiply-adds than `full_reference_limit` is compared on `samples` seeded elements
// of each output, each computed as one f64 dot product; every other op in full.
struct OpCheckOptions {
  // The options for the measured architecture at a small batch once a reduced network has been
  // checked in full: every op, products above 2^20 multiply-adds sampled (the reduced network
  // compared all their elements).
  static OpCheckOptions measured_network(const OptimizerSettings& update) {
    return {.full_reference_limit = std::int64_t{1} << 20, .update = update};
  }
  // The options at the measured batch once every op of its architecture has been checked at a
  // small batch (measured_network): the ops whose kernels depend on the batch's shape, the
  // products, on sampled elements (attention, which has no sampled reference, in full); the
  // other ops, the update among them, run unchecked (the step is applied, as a run's is).
  static OpCheckOptions measured_batch(const OptimizerSettings& update) {
    return {.full_reference_limit = 0, .products_only = true, .update = update};
  }

  std::int64_t full_reference_limit = std::int64_t{1} << 26;  // about 0.1 s of f64 loops
  std::int64_t samples = 256;
  // Only the product ops (GEMM, convolution, fully connected, attention) are checked.
  bool products_only = false;

  // An op over every parameter (the weight cast, the unscale, the optimizer) of a model with more
  // parameters than this is compared on whole seeded tensors holding 2^20 values or more.
  std::int64_t full_update_limit = std::int64_t{1} << 22;
  // With settings, the step's update is checked too (the loss-scale unscale, the optimizer)
  // and applied, as run(true, settings) would; without, forward and backward only.
  std::optional<OptimizerSettings> update;
};

class TrainingStep {
 public:
  static Status create(Backend& backend, const Network& network, const StepOptions& options,
                       std::unique_ptr<TrainingStep>* out);
  // What create() would allocate (arena and workspace), planned without allocating.
  static Status planned_bytes(Backend& backend, const Network& network, const StepOptions& options,
                              std::uint64_t* out);
  // What check_ops(`check`) would hold in host memory beyond the step's own, at its most (its f64
  // copies of the largest ops' operands, the forward's masks until the run ends), planned
  // likewise (OpCheckFootprint).
  static Status planned_check_bytes(Backend& backend, const Network& network,
                                    const StepOptions& options, const OpCheckOptions& check,
                                    std::uint64_t* out);
  ~TrainingStep();
  TrainingStep(const TrainingStep&) = delete;
  TrainingStep& operator=(const TrainingStep&) = delete;

  // One tensor per network input, by name: values in plain layout (NCHW, [rows, features]),
  // indices within their input's bound.
  Status set_batch(const std::vector<NamedTensor>& batch);
  // The framework's initialization from a seed; running statistics 0 / 1, momentum 0, the
  // loss scale at its initial value, no step taken.
  Status initialize_parameters(std::uint64_t seed);

  // Forward, loss and backward; with `update`, the optimizer step too. `breakdown` (optional)
  // times every layer at the cost of a wait after each op.
  Status run(bool update, const OptimizerSettings& settings, StepBreakdown* breakdown = nullptr);
  Status loss(double* out);  // the sum of the network's loss layers, from the last run
  // What layer `name` computed in the last run, plain, as doubles (an evaluation's logits).
  Status layer_output(const std::string& name, std::vector<double>* out);
  // The index of the largest value in each row of `cols` values of that output (the first on
  // ties): an evaluation's predictions, read in the output's own dtype, never widened.
  Status layer_argmax(const std::string& name, std::int64_t cols, std::vector<std::int32_t>* out);
  // Runs one step, checking every op (the weight casts, forward, backward and, with
  // `options.update`, the update) against the same op in f64 fed the inputs the step's op read.
  // Tolerance by the output's dtype: f32 1e-4, bf16 2e-2, f16 and TF32 products 5e-3; a cast
  // must round to nearest even exactly; a value updated in place is judged by its change.
  Status check_ops(OpCheck* out, const OpCheckOptions& options = {});

  // Parameters and buffers (running statistics, num_batches_tracked) as the framework's
  // state dict lists them; gradients under the parameters' names.
  Status state(std::vector<NamedTensor>* out);
  Status load_state(const std::vector<NamedTensor>& tensors);  // every name must be known
  Status gradients(std::vector<NamedTensor>* out);

  // Data parallel (models/gradient_buckets.h): the step's gradient buckets of about
  // `bucket_bytes`, and from now on every run's gradients all-reduced across `communicator`'s
  // ranks in those buckets (its size must be StepOptions::data_parallel_ranks). Null: no
  // exchange (a local step, for timing the step without communication).
  std::vector<GradientBucket> gradient_buckets(std::size_t bucket_bytes) const;
  Status exchange_gradients(Communicator* communicator, const BucketOptions& options = {});
  GradientExchange* gradient_exchange() const;  // null when gradients are not exchanged

  std::uint64_t memory_bytes() const;           // arena plus workspace: everything the step touches
  std::uint64_t optimizer_state_bytes() const;  // momentum or moments (and LAMB's offsets)
  std::int64_t steps_taken() const { return steps_taken_; }  // updates applied
  // The dynamic loss scale and the steps it skipped; null when the step does not scale.
  const DynamicLossScale* loss_scale() const;
  // What ran, one line per distinct implementation with the number of ops using it.
  std::vector<std::string> implementations() const;
  // The ops whose plans run reference kernels (seconds 0: see StepBreakdown::reference_ops).
  std::vector<ReferenceOp> reference_ops() const;
  // True when some op's bf16 arithmetic is emulated (Plan::emulates_bf16).
  bool emulates_bf16() const;
  // The forward and backward product ops, in the order they run.
  std::vector<LayerProductOp> product_ops() const;

  struct Impl;

 private:
  explicit TrainingStep(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::int64_t steps_taken_ = 0;
  std::int64_t dropout_step() const;  // which masks the next run draws
  // The ops of one step in the order run() executes them, each through `run_op`.
  template <typename RunOp>
  Status run_ops(bool update, const OptimizerSettings& settings, RunOp&& run_op);
};

}  // namespace tb
