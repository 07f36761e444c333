#include "reports/stats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace tb {

namespace {

// A two-sided Student-t quantile from its table for 1..30 degrees of freedom; beyond, the
// normal quantile `z` plus its first-order correction.
double student_t(const std::array<double, 30>& table, double z, std::size_t dof) {
  if (dof == 0) return INFINITY;
  if (dof <= table.size()) return table[dof - 1];
  return z + (z * z * z + z) / (4.0 * static_cast<double>(dof));
}

}  // namespace

double student_t_975(std::size_t dof) {
  static constexpr std::array<double, 30> kTable = {
      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  return student_t(kTable, 1.959964, dof);
}

double student_t_99(std::size_t dof) {
  static constexpr std::array<double, 30> kTable = {
      31.821, 6.965, 4.541, 3.747, 3.365, 3.143, 2.998, 2.896, 2.821, 2.764,
      2.718,  2.681, 2.650, 2.624, 2.602, 2.583, 2.567, 2.552, 2.539, 2.528,
      2.518,  2.508, 2.500, 2.492, 2.485, 2.479, 2.473, 2.467, 2.462, 2.457};
  return student_t(kTable, 2.326348, dof);
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

namespace {

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// P(U <= u) under the null hypothesis, exact, by counting rank arrangements.
double exact_u_cdf(std::size_t n1, std::size_t n2, double u) {
  // counts[j][v]: arrangements of i first-set and j second-set values with U = v, built up in i.
  const std::size_t max_u = n1 * n2;
  std::vector<std::vector<double>> counts(n2 + 1, std::vector<double>(max_u + 1, 0));
  for (std::size_t j = 0; j <= n2; ++j) counts[j][0] = 1;  // i = 0
  for (std::size_t i = 1; i <= n1; ++i) {
    std::vector<std::vector<double>> next(n2 + 1, std::vector<double>(max_u + 1, 0));
    next[0][0] = 1;
    for (std::size_t j = 1; j <= n2; ++j)
      for (std::size_t v = 0; v <= i * j; ++v)
        // The largest value belongs to the first set (it beats all j of the second) or not.
        next[j][v] = (v >= j ? counts[j][v - j] : 0) + next[j - 1][v];
    counts = std::move(next);
  }
  double total = 0, below = 0;
  for (std::size_t v = 0; v <= max_u; ++v) {
    total += counts[n2][v];
    if (static_cast<double>(v) <= u + 1e-9) below += counts[n2][v];
  }
  return below / total;
}

double binomial(std::size_t n, std::size_t k) {
  double result = 1;
  for (std::size_t i = 1; i <= k; ++i)
    result = result * static_cast<double>(n - k + i) / static_cast<double>(i);
  return result;
}

}  // namespace

RankTest mann_whitney(std::span<const double> first, std::span<const double> second) {
  RankTest test;
  const std::size_t n1 = first.size(), n2 = second.size();
  if (n1 == 0 || n2 == 0) return test;
  test.min_p = std::min(1.0, 2.0 / binomial(n1 + n2, n1));
  // Ranks of the pooled samples, ties sharing their mean rank.
  std::vector<std::pair<double, int>> pooled;
  for (double v : first) pooled.emplace_back(v, 0);
  for (double v : second) pooled.emplace_back(v, 1);
  std::sort(pooled.begin(), pooled.end());
  double rank_sum = 0, tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < pooled.size();) {
    std::size_t j = i;
    while (j < pooled.size() && pooled[j].first == pooled[i].first) ++j;
    const double mean_rank = 0.5 * static_cast<double>(i + 1 + j);
    const double t = static_cast<double>(j - i);
    if (t > 1) ties = true;
    tie_term += t * t * t - t;
    for (std::size_t k = i; k < j; ++k)
      if (pooled[k].second == 0) rank_sum += mean_rank;
    i = j;
  }
  test.u = rank_sum - static_cast<double>(n1 * (n1 + 1)) / 2;
  const double mean = static_cast<double>(n1 * n2) / 2;
  if (!ties && n1 + n2 <= 40) {
    const double lower = exact_u_cdf(n1, n2, std::min(test.u, 2 * mean - test.u));
    test.p_value = std::min(1.0, 2 * lower);
  } else {
    const double n = static_cast<double>(n1 + n2);
    const double variance =
        static_cast<double>(n1 * n2) / 12 * ((n + 1) - tie_term / (n * (n - 1)));
    if (variance <= 0) return test;  // every value equal: no evidence of a difference
    const double z =
        (std::fabs(test.u - mean) - 0.5) / std::sqrt(variance);  // continuity-corrected
    test.p_value = std::min(1.0, std::erfc(std::max(z, 0.0) / std::sqrt(2.0)));
  }
  return test;
}

BootstrapMedian::BootstrapMedian(std::span<const double> samples)
    : sorted_(samples.begin(), samples.end()) {
  std::sort(sorted_.begin(), sorted_.end());
}

double BootstrapMedian::draw(std::mt19937_64& rng) const {
  const std::size_t n = sorted_.size();
  const std::size_t k = (n + 1) / 2;  // the rank (from 1) of the median, the lower one for even n
  auto beta = [&rng](double a, double b) {
    const double x = std::gamma_distribution<double>(a)(rng);
    const double y = std::gamma_distribution<double>(b)(rng);
    return x / (x + y);
  };
  auto at = [&](double u) { return sorted_[std::min(n - 1, static_cast<std::size_t>(u * n))]; };
  const double u = beta(static_cast<double>(k), static_cast<double>(n + 1 - k));
  if (n % 2) return at(u);
  // Given U_(k) = u, the other n - k draws are uniform on (u, 1): the next is their minimum.
  const double next = u + (1 - u) * beta(1, static_cast<double>(n - k));
  return 0.5 * (at(u) + at(next));
}

RatioInterval median_ratio(std::span<const double> first, std::span<const double> second,
                           int resamples) {
  RatioInterval interval;
  if (first.empty() || second.empty()) return interval;
  interval.ratio =
      median_of({second.begin(), second.end()}) / median_of({first.begin(), first.end()});
  std::mt19937_64 rng(0x7261746966ull);
  const BootstrapMedian a(first), b(second);
  std::vector<double> ratios;
  for (int r = 0; r < resamples; ++r) ratios.push_back(b.draw(rng) / a.draw(rng));
  std::sort(ratios.begin(), ratios.end());
  interval.low = ratios[static_cast<std::size_t>(0.025 * (resamples - 1))];
  interval.high = ratios[static_cast<std::size_t>(0.975 * (resamples - 1))];
  return interval;
}

}  // namespace tb
