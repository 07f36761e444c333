#include "bench/harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <fmt/format.h>

namespace tb {

namespace {

// Decisions taken once for every rank: each is made from the largest of the ranks' values, so
// all ranks see the same number and take the same branch.
class Agreement {
 public:
  explicit Agreement(World* ranks) : ranks_(ranks && ranks->size() > 1 ? ranks : nullptr) {}
  double slowest(double seconds) const { return ranks_ ? ranks_->max(seconds) : seconds; }

 private:
  World* ranks_;
};

// One sample's time per unit, the slowest rank's. A time that is not positive and finite on
// any rank (a device that could not time the work, a clock that went wrong) fails the case on
// every rank instead of joining the samples.
Status read_sample(Timer& timer, int units, const Agreement& agreement, double* seconds_per_unit) {
  const double mine = timer.elapsed_seconds();
  const double seconds = agreement.slowest(std::isfinite(mine) && mine > 0 ? mine : INFINITY);
  if (!std::isfinite(seconds)) {
    if (std::isfinite(mine) && mine > 0)
      return Status::Failed("another rank's timer read no positive, finite time for a sample")
          .because(ReasonCode::timer_failed);
    return Status::Failed(
               fmt::format(
                   "the timer read {} s for a sample of {} unit{}: not a positive, finite time",
                   mine, units, units == 1 ? "" : "s"))
        .because(ReasonCode::timer_failed);
  }
  *seconds_per_unit = seconds / units;
  return Status::Ok();
}

}  // namespace

Status measure(Workload& workload, Backend& backend, const HarnessConfig& config, Measurement* out,
               World* ranks, const PhaseListener& on_phase) {
  *out = Measurement{};
  using Clock = std::chrono::steady_clock;
  const Agreement agreement(ranks);
  // The slowest rank's time since `start`: what every budget below is held against.
  auto seconds_since = [&](Clock::time_point start) {
    return agreement.slowest(std::chrono::duration<double>(Clock::now() - start).count());
  };
  auto start_phase = [&] {
    if (config.phase_delay_seconds > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(config.phase_delay_seconds));
    return Clock::now();
  };
  std::unique_ptr<Timer> timer = backend.make_timer();
  if (workload.times_itself()) {
    if (on_phase) on_phase("timing");
    start_phase();
    TB_RETURN_IF_ERROR(workload.run());
    out->samples_s = workload.own_samples();
    if (out->samples_s.empty())
      return Status::Failed("the workload produced no time").because(ReasonCode::timer_failed);
    for (double seconds : out->samples_s)
      if (!(std::isfinite(seconds) && seconds > 0))
        return Status::Failed(
                   fmt::format("a run's time is {} s: not a positive, finite time", seconds))
            .because(ReasonCode::timer_failed);
    return Status::Ok();
  }

  // Warm-up: caches, page tables, JIT code and clocks settle. The fastest run sizes a sample.
  // The count is always run; the time budget bounds only the warm-up time asked beyond it.
  // Every rank runs the same count: the count is reached together, and the time beyond it is
  // the slowest rank's.
  double fastest = INFINITY;
  if (on_phase) on_phase("warm-up");
  const auto warmup_start = start_phase();
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
    TB_RETURN_IF_ERROR(read_sample(*timer, 1, agreement, &seconds));
    fastest = std::min(fastest, seconds);
    ++out->warmup_runs;
  }

  // A unit that reads its own output is timed alone, after its inputs are restored; so is a
  // unit that must start from cold caches. `fastest` is the slowest rank's, so all agree.
  if (!workload.output_feeds_back() && !config.flush_caches && fastest < config.min_sample_seconds)
    out->units_per_sample = static_cast<int>(
        std::min(1e6, std::ceil(config.min_sample_seconds / std::max(fastest, 1e-9))));

  if (on_phase) on_phase("timing");
  const auto start = start_phase();
  auto sample_more = [&] {
    const int taken = static_cast<int>(out->samples_s.size());
    if (taken < config.min_repetitions) return true;
    return taken < config.max_repetitions && seconds_since(start) < config.time_budget_seconds;
  };
  while (sample_more()) {
    if (workload.output_feeds_back()) TB_RETURN_IF_ERROR(workload.reset());
    if (config.flush_caches) {
      TB_RETURN_IF_ERROR(backend.flush_caches());
      backend.synchronize();
    }
    timer->start();
    for (int unit = 0; unit < out->units_per_sample; ++unit) TB_RETURN_IF_ERROR(workload.run());
    timer->stop();
    double seconds = 0;
    TB_RETURN_IF_ERROR(read_sample(*timer, out->units_per_sample, agreement, &seconds));
    out->samples_s.push_back(seconds);
  }
  return Status::Ok();
}

}  // namespace tb
