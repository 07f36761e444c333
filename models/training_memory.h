// The memory a training step needs, part by part, counted from a network before anything is
// planned: what the runner checks a case against, what a case's measured peak is compared
// with, and what the capacity planner (reports/capacity_plan.h) shards across devices.
#pragma once

#include <cstdint>

#include "models/network.h"
#include "models/training_step.h"

namespace tb {

// Bytes on one device holding the whole model, at the network's batch.
struct TrainingMemory {
  double weights = 0;          // the parameters in the master dtype (fp32 in mixed precision)
  double compute_weights = 0;  // their low-precision copy the layers read (mixed precision only)
  double gradients = 0;        // master dtype
  double optimizer_state = 0;  // SGD's momentum, or Adam's and LAMB's two moments: master dtype
  double activations = 0;      // every tensor kept for backward, its gradient and partials
  // With each block (a name prefix ending in its index: "layer1.0", "bert.encoder.layer.3")
  // recomputed in backward: the blocks' outputs kept, one block's activations live at a time.
  double activations_recomputed = 0;
  // The largest layer's parameters in the compute dtype: what a fully sharded step gathers at
  // once.
  double largest_layer_weights = 0;

  double states() const { return weights + compute_weights + gradients + optimizer_state; }
  double total(bool recompute = false) const {
    return states() + (recompute ? activations_recomputed : activations);
  }
};

TrainingMemory training_memory(const Network& network, const StepOptions& options);

// training_memory(...).total(): to refuse a size that cannot fit before planning it.
std::uint64_t estimate_training_bytes(const Network& network, const StepOptions& options);

// Optimizer values kept per parameter: 1 (SGD momentum) or 2 (AdamW, LAMB).
int optimizer_values_per_parameter(OptimizerKind optimizer);

}  // namespace tb
