// The timing harness: warm-up, then samples until both a minimum count and a time budget are
// met (or a maximum count is reached). Every sample is kept. Validation is not done here:
// it runs on its own untimed execution before measuring.
#pragma once

#include <vector>

#include "backends/backend.h"
#include "workloads/workload.h"

namespace tb {

struct HarnessConfig {
  int warmup_runs = 2;               // at least this many untimed runs ...
  double warmup_seconds = 0.1;       // ... and until this much time has passed
  int min_repetitions = 5;           // samples kept, at least
  int max_repetitions = 1000;        // and at most
  double time_budget_seconds = 1.0;  // keep sampling until this much time has been spent
  double min_sample_seconds = 1e-3;  // short units are batched so one sample lasts this long
  bool flush_caches = false;         // evict caches before every sample (then one unit per sample)
};

struct Measurement {
  std::vector<double> samples_s;  // seconds per unit, one per sample
  int units_per_sample = 1;
  int warmup_runs = 0;
};

// Throws nothing: a failing run ends the measurement with its Status.
Status measure(Workload& workload, Backend& backend, const HarnessConfig& config, Measurement* out);

}  // namespace tb
