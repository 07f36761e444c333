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

// A seeded batch for every input of `network`: values uniform in [-1, 1), indices uniform
// below their bound (images and labels; a model with structured inputs builds its own).
std::vector<NamedTensor> seeded_batch(const Network& network, std::uint64_t seed);

// A step on `backend` with seeded weights and `batch`, ready to run.
Status prepared_step(Backend& backend, const Network& network, const StepOptions& options,
                     const std::vector<NamedTensor>& batch, std::uint64_t weight_seed,
                     std::unique_ptr<TrainingStep>* out);

// The worst per-parameter distance of `grads` from `reference` (the same parameters in the
// same order): relative L2, except that a reference gradient smaller than kCancelledGradient
// of the network's RMS gradient (scaled to its size) is measured against that floor: such a
// gradient has cancelled to rounding (attention's key bias, whose exact gradient is 0) and
// its relative error measures rounding noise, not correctness.
inline constexpr double kCancelledGradient = 1e-3;
struct GradientError {
  double error = 0;
  std::string parameter;
};
GradientError worst_gradient_error(const std::vector<NamedTensor>& grads,
                                   const std::vector<NamedTensor>& reference);

// Runs forward and backward (no update) on `backend` with `options`, and in f64 / plain on the
// host (the shared CPU code), from the same weights (seeded) and batch.
Status compare_with_reference(Backend& backend, const Network& network, const StepOptions& options,
                              const std::vector<NamedTensor>& batch, std::uint64_t weight_seed,
                              ReferenceComparison* out);

}  // namespace tb
