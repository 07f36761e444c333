// Summary statistics of timing samples.
#pragma once

#include <cstddef>
#include <span>

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

}  // namespace tb
