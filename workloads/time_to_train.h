// What every time-to-train workload shares: PyTorch's one-cycle schedule, the MLPerf
// aggregate over runs, and a run's record (its quality curve).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb {

// torch.optim.lr_scheduler.OneCycleLR with its defaults: cosine warm-up over the first 30%
// of `total_steps` from peak / 25 to peak, cosine decay to peak / 25e4, momentum cycled
// inversely between 0.95 and 0.85.
struct OneCycle {
  double peak_lr = 0.1;
  std::int64_t total_steps = 1;
  double learning_rate(std::int64_t step) const;
  double momentum(std::int64_t step) const;
};

struct CurvePoint {
  double time_s = 0;  // since the clock started
  std::int64_t samples = 0;
  double epoch = 0;
  double quality = 0;  // accuracy on the evaluation set
};

struct TrainingRun {
  std::uint64_t seed = 0;
  bool converged = false;
  double time_to_train_s = 0;  // when converged: to the first evaluation at the target
  double data_load_s = 0, evaluation_s = 0, training_s = 0;
  std::int64_t samples = 0, steps = 0;
  std::vector<CurvePoint> curve;
  nlohmann::json to_json() const;
};

// MLPerf's aggregate of converged runs' times: drop the fastest and the slowest, mean of the
// rest (with fewer than 3 converged runs, the mean of those there are).
std::optional<double> mlperf_aggregate(const std::vector<TrainingRun>& runs);

}  // namespace tb
