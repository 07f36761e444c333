// Summary statistics of timing samples.
#pragma once

#include <cstddef>
#include <random>
#include <span>
#include <vector>

namespace tb {

struct SampleStats {
  std::size_t count = 0;
  double median = 0, mean = 0, min = 0, max = 0;
  double stddev = 0;                   // sample standard deviation (n - 1)
  double ci95_low = 0, ci95_high = 0;  // 95% confidence interval of the mean (Student's t)
};

SampleStats summarize(std::span<const double> samples);

// Two-sided 97.5% quantile of Student's t with `dof` degrees of freedom.
double student_t_975(std::size_t dof);
// One-sided 99% quantile of Student's t (the two-sided 98% interval).
double student_t_99(std::size_t dof);

// Mann-Whitney U test, two-sided: do the two sample sets come from one distribution?
struct RankTest {
  double u = 0;        // U of the first set
  double p_value = 1;  // exact for small sets without ties, normal approximation otherwise
  double min_p = 1;    // the smallest p these set sizes can ever give (2 / C(n1 + n2, n1))
};
RankTest mann_whitney(std::span<const double> first, std::span<const double> second);

// The bootstrap distribution of a sample's median, drawn in O(1) per resample after one sort:
// the k-th smallest of n indices drawn uniformly is floor(n U_(k)), where U_(k) follows
// Beta(k, n + 1 - k). No resample is built or sorted, so a report of millions of samples
// compares in about the time of one sort, where 2,000 sorted resamples took minutes.
class BootstrapMedian {
 public:
  explicit BootstrapMedian(std::span<const double> samples);  // at least one sample
  double draw(std::mt19937_64& rng) const;

 private:
  std::vector<double> sorted_;
};

// Ratio of medians second / first with a 95% percentile-bootstrap interval (seeded, so the
// same samples always give the same interval).
struct RatioInterval {
  double ratio = 0, low = 0, high = 0;
};
RatioInterval median_ratio(std::span<const double> first, std::span<const double> second,
                           int resamples = 2000);

}  // namespace tb
