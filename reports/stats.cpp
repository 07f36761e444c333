#include "reports/stats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <vector>

namespace tb {

double student_t_975(std::size_t dof) {
  static constexpr std::array<double, 30> kTable = {
      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof == 0) return INFINITY;
  if (dof <= kTable.size()) return kTable[dof - 1];
  // Beyond 30 degrees of freedom: the normal quantile plus its first-order correction.
  const double z = 1.959964;
  return z + (z * z * z + z) / (4.0 * static_cast<double>(dof));
}

SampleStats summarize(std::span<const double> samples) {
  SampleStats stats;
  stats.count = samples.size();
  if (samples.empty()) return stats;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  stats.min = sorted.front();
  stats.max = sorted.back();
  stats.median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  stats.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(n);
  double squares = 0;
  for (double sample : sorted) squares += (sample - stats.mean) * (sample - stats.mean);
  stats.stddev = n > 1 ? std::sqrt(squares / static_cast<double>(n - 1)) : 0;
  const double half_width =
      n > 1 ? student_t_975(n - 1) * stats.stddev / std::sqrt(static_cast<double>(n)) : 0;
  stats.ci95_low = stats.mean - half_width;
  stats.ci95_high = stats.mean + half_width;
  return stats;
}

}  // namespace tb
