// Where a step's time goes, over several instrumented steps: one step reads noise as a
// bottleneck (a preempted op on a shared machine took 6x its twin's time), the median of several
// and the spread of each layer say which differences are real.
#pragma once
#include <vector>

#include "models/training_step.h"

namespace tb {

// How much each figure moved between the steps: the interquartile range over them (for five
// steps, the 4th smallest less the 2nd), of each layer's forward + backward time and of the
// whole step.
struct BreakdownSpread {
  std::vector<double> layer_s;  // in the order of StepBreakdown::layers
  double total_s = 0;
};

// The steps element by element: each layer's forward, backward and product-op time, the
// optimizer, the weight casts, the total and each reference op's time are the medians over
// `steps` (the same network's, so the same layers and ops in the same order); the layers'
// names, kinds, implementations and product FLOPs are the first step's. An empty list gives an empty breakdown.
StepBreakdown median_breakdown(const std::vector<StepBreakdown>& steps, BreakdownSpread* spread);

// Whether the layer with time `a` (spread `spread_a`) is slower than the one with `b` by more
// than noise: their intervals of a median plus or minus half its spread do not overlap.
bool slower_beyond_spread(double a, double spread_a, double b, double spread_b);

}  // namespace tb
