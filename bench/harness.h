// The timing harness: warm-up, then samples until both a minimum count and a time budget are
// met (or a maximum count is reached). Every sample is kept. Validation is not done here:
// it runs on its own untimed execution before measuring.
//
// Across ranks every decision (warm-up runs, units per sample, samples) is taken once for all,
// from the slowest rank's clock: each run() of a data-parallel step is a collective, so a rank
// that stopped one unit before its peers would leave them waiting for ever.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/communicator.h"
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
  // Tests only (TRAINBENCH_TEST_RANK_DELAY): this process sleeps this long before each phase
  // (warm-up, sampling) starts its clock, as a rank preempted at that moment would. Its peers
  // then wait as long in their first collective, on their own clocks.
  double phase_delay_seconds = 0;
};

struct Measurement {
  std::vector<double> samples_s;  // seconds per unit, one per sample
  int units_per_sample = 1;
  int warmup_runs = 0;
};

// The harness's phases, as each starts: "warm-up", then "timing" (a workload that times itself
// has only "timing").
using PhaseListener = std::function<void(std::string_view phase)>;

// Throws nothing: a failing run ends the measurement with its Status. `ranks`: the processes
// measuring the same case together, each sample's time being the slowest rank's; null (or one
// rank): this process alone, with no exchange at all.
Status measure(Workload& workload, Backend& backend, const HarnessConfig& config, Measurement* out,
               World* ranks = nullptr, const PhaseListener& on_phase = nullptr);

}  // namespace tb
