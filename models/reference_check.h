// One training step of a network against the double-precision reference (the shared CPU
// code in f64) from the same weights and batch: the check a model workload runs before its
// speed is reported, and what the tests assert on.
#pragma once

#include <cstdint>
#include <string>

#include "backends/backend.h"
#include "models/network.h"
#include "models/training_step.h"

namespace tb {

struct ReferenceComparison {
  double loss = 0, reference_loss = 0;
  double worst_gradient_error = 0;  // relative L2 distance, worst parameter
  std::string worst_parameter;
  std::int64_t parameters_checked = 0;
};

// Seeded images in [-1, 1) and labels for `network`'s input.
void seeded_batch(const Network& network, std::uint64_t seed, std::vector<float>* images,
                  std::vector<std::int32_t>* labels);

// A step on `backend` with seeded weights and a seeded batch, ready to run.
Status prepared_step(Backend& backend, const Network& network, const StepOptions& options,
                     std::uint64_t batch_seed, std::uint64_t weight_seed,
                     std::unique_ptr<TrainingStep>* out);

// Runs forward and backward (no update) on `backend` with `options` and in f64 / plain.
Status compare_with_reference(Backend& backend, const Network& network, const StepOptions& options,
                              std::uint64_t seed, ReferenceComparison* out);

}  // namespace tb
