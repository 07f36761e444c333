#include "bench/harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

namespace tb {

namespace {

// One sample's time per unit: a time that is not positive and finite (a device that could
// not time the work, a clock that went wrong) fails the case instead of joining the samples.
Status read_sample(Timer& timer, int units, double* seconds_per_unit) {
  const double seconds = timer.elapsed_seconds();
  if (!(std::isfinite(seconds) && seconds > 0))
    return Status::Failed(
        fmt::format("the timer read {} s for a sample of {} unit{}: not a "
                    "positive, finite time",
                    seconds, units, units == 1 ? "" : "s"));
  *seconds_per_unit = seconds / units;
  return Status::Ok();
}

}  // namespace

Status measure(Workload& workload, Backend& backend, const HarnessConfig& config,
               Measurement* out) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  std::unique_ptr<Timer> timer = backend.make_timer();
  *out = Measurement{};
  if (workload.times_itself()) {
    TB_RETURN_IF_ERROR(workload.run());
    out->samples_s = workload.own_samples();
    if (out->samples_s.empty()) return Status::Failed("the workload produced no time");
    for (double seconds : out->samples_s)
      if (!(std::isfinite(seconds) && seconds > 0))
        return Status::Failed(
            fmt::format("a run's time is {} s: not a positive, finite time", seconds));
    return Status::Ok();
  }

  // Warm-up: caches, page tables, JIT code and clocks settle. The fastest run sizes a sample.
  // The count is always run; the time budget bounds only the warm-up time asked beyond it.
  double fastest = INFINITY;
  const auto warmup_start = Clock::now();
  auto warm_up_longer = [&] {
    const double elapsed = seconds_since(warmup_start);
    return elapsed < config.warmup_seconds && elapsed <= config.time_budget_seconds;
  };
  while (out->warmup_runs < config.warmup_runs || warm_up_longer()) {
    if (workload.output_feeds_back()) TB_RETURN_IF_ERROR(workload.reset());
    timer->start();
    TB_RETURN_IF_ERROR(workload.run());
    timer->stop();
    double seconds = 0;
    TB_RETURN_IF_ERROR(read_sample(*timer, 1, &seconds));
    fastest = std::min(fastest, seconds);
    ++out->warmup_runs;
  }

  // A unit that reads its own output is timed alone, after its inputs are restored; so is a
  // unit that must start from cold caches.
  if (!workload.output_feeds_back() && !config.flush_caches && fastest < config.min_sample_seconds)
    out->units_per_sample = static_cast<int>(
        std::min(1e6, std::ceil(config.min_sample_seconds / std::max(fastest, 1e-9))));

  const auto start = Clock::now();
  while (static_cast<int>(out->samples_s.size()) < config.min_repetitions ||
         (seconds_since(start) < config.time_budget_seconds &&
          static_cast<int>(out->samples_s.size()) < config.max_repetitions)) {
    if (workload.output_feeds_back()) TB_RETURN_IF_ERROR(workload.reset());
    if (config.flush_caches) {
      TB_RETURN_IF_ERROR(backend.flush_caches());
      backend.synchronize();
    }
    timer->start();
    for (int unit = 0; unit < out->units_per_sample; ++unit) TB_RETURN_IF_ERROR(workload.run());
    timer->stop();
    double seconds = 0;
    TB_RETURN_IF_ERROR(read_sample(*timer, out->units_per_sample, &seconds));
    out->samples_s.push_back(seconds);
  }
  return Status::Ok();
}

}  // namespace tb
