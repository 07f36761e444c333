#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reports/stats.h"

namespace tb {
namespace {

TEST(Stats, OddCountMedianAndSpread) {
  const std::vector<double> samples = {5, 1, 4, 2, 3};
  const SampleStats stats = summarize(samples);
  EXPECT_EQ(stats.count, 5u);
  EXPECT_DOUBLE_EQ(stats.median, 3);
  EXPECT_DOUBLE_EQ(stats.mean, 3);
  EXPECT_DOUBLE_EQ(stats.min, 1);
  EXPECT_DOUBLE_EQ(stats.max, 5);
  EXPECT_DOUBLE_EQ(stats.stddev, std::sqrt(2.5));               // sample (n - 1) deviation
  const double half = 2.776 * std::sqrt(2.5) / std::sqrt(5.0);  // t(0.975, 4)
  EXPECT_NEAR(stats.ci95_low, 3 - half, 1e-12);
  EXPECT_NEAR(stats.ci95_high, 3 + half, 1e-12);
}

TEST(Stats, EvenCountMedianIsMidpoint) {
  const std::vector<double> samples = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(summarize(samples).median, 2.5);
}

TEST(Stats, SingleSampleHasNoSpread) {
  const std::vector<double> samples = {0.25};
  const SampleStats stats = summarize(samples);
  EXPECT_DOUBLE_EQ(stats.median, 0.25);
  EXPECT_DOUBLE_EQ(stats.stddev, 0);
  EXPECT_DOUBLE_EQ(stats.ci95_low, 0.25);
  EXPECT_DOUBLE_EQ(stats.ci95_high, 0.25);
}

TEST(Stats, EmptyIsZeroCount) {
  EXPECT_EQ(summarize({}).count, 0u);
}

TEST(Stats, StudentQuantiles) {
  EXPECT_NEAR(student_t_975(1), 12.706, 1e-3);
  EXPECT_NEAR(student_t_975(10), 2.228, 1e-3);
  EXPECT_NEAR(student_t_975(30), 2.042, 1e-3);
  EXPECT_NEAR(student_t_975(100), 1.984, 2e-3);
  EXPECT_NEAR(student_t_975(100000), 1.96, 1e-3);
  EXPECT_TRUE(std::isinf(student_t_975(0)));
}

}  // namespace
}  // namespace tb
