// Runs a Network's training step on one backend: forward, loss, backward and the optimizer
// update, as ops planned once on buffers allocated once (one arena, first touched before any
// step). Activations use the backend's native layout throughout; parameters, their gradients
// and the optimizer state live in flat buffers in the framework's order, so one optimizer op
// updates them all and they load and save by name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "models/network.h"

namespace tb {

struct SgdSettings {
  float learning_rate = 0.1f, momentum = 0.9f, weight_decay = 1e-4f;
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
};
// Where one step's time goes, from an instrumented step that waits after every op.
struct StepBreakdown {
  std::vector<LayerTime> layers;  // in forward order; backward includes gradient sums
  double optimizer_s = 0;
  double weight_cast_s = 0;  // mixed precision: the compute copy of the weights
  double total_s = 0;
};

struct StepOptions {
  DType dtype = DType::f32;  // f32, bf16 (mixed: models/precision.h), or f64 (the reference)
  Layout layout = Layout::native;
  bool winograd_allowed = false;  // convolutions may use Winograd where the library picks it
};

// Every op of a step checked against the same op in f64 (the shared CPU code) fed the step's
// own inputs: arithmetic checked op by op, without the amplification a whole network adds.
struct OpCheck {
  std::int64_t ops_checked = 0, outputs_compared = 0;
  double worst_error = 0;  // relative L2 distance of an output from the f64 result
  double worst_tolerance = 0;
  std::string worst_output;  // "layer1.0.conv1 conv diff_src"
  bool passed = false;
};

class TrainingStep {
 public:
  static Status create(Backend& backend, const Network& network, const StepOptions& options,
                       std::unique_ptr<TrainingStep>* out);
  // What create() would allocate (arena and workspace), planned without allocating.
  static Status planned_bytes(Backend& backend, const Network& network, const StepOptions& options,
                              std::uint64_t* out);
  ~TrainingStep();
  TrainingStep(const TrainingStep&) = delete;
  TrainingStep& operator=(const TrainingStep&) = delete;

  // Images in plain NCHW, one label per image in [0, classes).
  Status set_batch(const std::vector<float>& images, const std::vector<std::int32_t>& labels);
  // The framework's initialization from a seed; running statistics 0 / 1, momentum 0.
  Status initialize_parameters(std::uint64_t seed);

  // Forward, loss and backward; with `update`, the optimizer step too. `breakdown` (optional)
  // times every layer at the cost of a wait after each op.
  Status run(bool update, const SgdSettings& sgd, StepBreakdown* breakdown = nullptr);
  Status loss(double* out);
  // After run(false, ...): every forward and backward op against f64 on this step's inputs.
  // Tolerance by the output's dtype: f32 1e-4, bf16 2e-2.
  Status check_ops(OpCheck* out);

  // Parameters and buffers (running statistics, num_batches_tracked) as the framework's
  // state dict lists them; gradients under the parameters' names.
  Status state(std::vector<NamedTensor>* out);
  Status load_state(const std::vector<NamedTensor>& tensors);  // every name must be known
  Status gradients(std::vector<NamedTensor>* out);

  std::uint64_t memory_bytes() const;  // arena plus workspace: everything the step touches
  std::int64_t steps_taken() const { return steps_taken_; }
  // What ran, one line per distinct implementation with the number of ops using it.
  std::vector<std::string> implementations() const;

  struct Impl;

 private:
  explicit TrainingStep(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::int64_t steps_taken_ = 0;
};

// Bytes a step of `network` will need in `dtype`, estimated before planning (activations,
// their gradients, per-layer saved state and parameters), to refuse a size that cannot fit.
std::uint64_t estimate_training_bytes(const Network& network, DType dtype);

}  // namespace tb
