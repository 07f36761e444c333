#include "models/step_breakdown.h"

#include <algorithm>
#include <functional>

namespace tb {
namespace {

struct Quartiles {
  double median = 0, spread = 0;
};

// Median, and the interquartile range by nearest rank (the values at 1/4 and 3/4 of the sorted
// list): with five steps the 2nd and 4th, so one outlier on each side moves neither.
Quartiles quartiles(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  const double median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {median, values[(3 * n) / 4 - (n % 4 == 0 ? 1 : 0)] - values[n / 4]};
}

Quartiles over_steps(const std::vector<StepBreakdown>& steps,
                     const std::function<double(const StepBreakdown&)>& figure) {
  std::vector<double> values;
  for (const StepBreakdown& step : steps) values.push_back(figure(step));
  return quartiles(std::move(values));
}

}  // namespace

StepBreakdown median_breakdown(const std::vector<StepBreakdown>& steps, BreakdownSpread* spread) {
  *spread = {};
  if (steps.empty()) return {};
  StepBreakdown median = steps.front();
  for (std::size_t l = 0; l < median.layers.size(); ++l) {
    median.layers[l].forward_s =
        over_steps(steps, [&](const StepBreakdown& s) { return s.layers[l].forward_s; }).median;
    median.layers[l].backward_s =
        over_steps(steps, [&](const StepBreakdown& s) { return s.layers[l].backward_s; }).median;
    median.layers[l].product_s =
        over_steps(steps, [&](const StepBreakdown& s) { return s.layers[l].product_s; }).median;
    spread->layer_s.push_back(over_steps(steps, [&](const StepBreakdown& s) {
                                return s.layers[l].forward_s + s.layers[l].backward_s;
                              }).spread);
  }
  for (std::size_t r = 0; r < median.reference_ops.size(); ++r)
    median.reference_ops[r].seconds = over_steps(steps, [&](const StepBreakdown& s) {
                                        return s.reference_ops[r].seconds;
                                      }).median;
  median.optimizer_s =
      over_steps(steps, [](const StepBreakdown& s) { return s.optimizer_s; }).median;
  median.weight_cast_s =
      over_steps(steps, [](const StepBreakdown& s) { return s.weight_cast_s; }).median;
  const Quartiles total = over_steps(steps, [](const StepBreakdown& s) { return s.total_s; });
  median.total_s = total.median;
  spread->total_s = total.spread;
  return median;
}

bool slower_beyond_spread(double a, double spread_a, double b, double spread_b) {
  return a - spread_a / 2 > b + spread_b / 2;
}

}  // namespace tb
