#include "workloads/time_to_train.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

namespace tb {
namespace {

constexpr double kWarmupFraction = 0.3, kDivFactor = 25, kFinalDivFactor = 1e4;
constexpr double kBaseMomentum = 0.85, kMaxMomentum = 0.95;

double cosine(double start, double end, double fraction) {
  return end + (start - end) / 2.0 * (1.0 + std::cos(std::numbers::pi * fraction));
}

// The phase a step is in and how far through it (PyTorch's phase boundaries).
template <typename Warmup, typename Decay>
double one_cycle(std::int64_t total_steps, std::int64_t step, Warmup warmup, Decay decay) {
  const double warmup_end = kWarmupFraction * static_cast<double>(total_steps) - 1;
  const double last = static_cast<double>(total_steps) - 1;
  const double s = static_cast<double>(std::min(step, total_steps - 1));
  if (s <= warmup_end) return warmup(s / warmup_end);
  return decay((s - warmup_end) / (last - warmup_end));
}

}  // namespace

double OneCycle::learning_rate(std::int64_t step) const {
  const double initial = peak_lr / kDivFactor, final_lr = initial / kFinalDivFactor;
  return one_cycle(
      total_steps, step, [&](double f) { return cosine(initial, peak_lr, f); },
      [&](double f) { return cosine(peak_lr, final_lr, f); });
}

double OneCycle::momentum(std::int64_t step) const {
  return one_cycle(
      total_steps, step, [](double f) { return cosine(kMaxMomentum, kBaseMomentum, f); },
      [](double f) { return cosine(kBaseMomentum, kMaxMomentum, f); });
}

nlohmann::json TrainingRun::to_json() const {
  nlohmann::json points = nlohmann::json::array();
  for (const CurvePoint& p : curve)
    points.push_back(
        {{"time_s", p.time_s}, {"samples", p.samples}, {"epoch", p.epoch}, {"quality", p.quality}});
  nlohmann::json j = {
      {"seed", seed},
      {"converged", converged},
      {"data_load_s", data_load_s},
      {"training_s", training_s},
      {"evaluation_s", evaluation_s},
      {"samples", samples},
      {"steps", steps},
      {"training_samples_per_s", training_s > 0 ? static_cast<double>(samples) / training_s : 0.0},
      {"curve", points}};
  if (converged) j["time_to_train_s"] = time_to_train_s;
  return j;
}

std::optional<double> mlperf_aggregate(const std::vector<TrainingRun>& runs) {
  std::vector<double> times;
  for (const TrainingRun& run : runs)
    if (run.converged) times.push_back(run.time_to_train_s);
  if (times.empty()) return std::nullopt;
  std::sort(times.begin(), times.end());
  if (times.size() >= 3) times = std::vector<double>(times.begin() + 1, times.end() - 1);
  return std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
}

}  // namespace tb
