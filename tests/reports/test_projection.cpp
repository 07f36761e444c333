#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "reports/projection.h"
#include "reports/report.h"

namespace tb {
namespace {

// 8 B .. 1 GiB in factors of 2, as `sizes=8:1G:x2` sweeps, timed by t = alpha + bytes / beta.
std::vector<SweepPoint> synthetic_sweep(double alpha, double beta, double noise = 0) {
  std::vector<SweepPoint> sweep;
  int i = 0;
  for (double bytes = 8; bytes <= 1 << 30; bytes *= 2, ++i)
    sweep.push_back({bytes, (alpha + bytes / beta) * (1 + (i % 2 ? noise : -noise))});
  return sweep;
}

TEST(Projection, FitRecoversKnownLatencyAndBandwidth) {
  std::string why_not;
  const auto fit = fit_alpha_beta(synthetic_sweep(5e-6, 10e9), &why_not);
  ASSERT_TRUE(fit) << why_not;
  EXPECT_NEAR(fit->alpha_s, 5e-6, 5e-6 * 1e-9);
  EXPECT_NEAR(fit->beta_bytes_per_s, 10e9, 10e9 * 1e-9);
  EXPECT_LT(fit->rms_relative_residual, 1e-12);
  EXPECT_EQ(fit->points, 28u);
  EXPECT_FALSE(fit->alpha_clamped);
}

// Alternating +-3% noise: both parameters within a few percent, and the residual says 3%.
TEST(Projection, FitOnNoisySweepStaysCloseAndReportsItsResidual) {
  std::string why_not;
  const auto fit = fit_alpha_beta(synthetic_sweep(20e-6, 2e9, 0.03), &why_not);
  ASSERT_TRUE(fit) << why_not;
  EXPECT_NEAR(fit->alpha_s / 20e-6, 1, 0.05);
  EXPECT_NEAR(fit->beta_bytes_per_s / 2e9, 1, 0.05);
  EXPECT_NEAR(fit->rms_relative_residual, 0.03, 0.005);
}

// A sweep that bends (the large sizes 20% slower, as out of cache): beta comes from the large
// sizes, alpha from the small ones, and the residual shows the bend. A line through every size
// would take the middle's bandwidth.
TEST(Projection, LargeSizesDecideBandwidthSmallOnesLatency) {
  std::vector<SweepPoint> sweep = synthetic_sweep(5e-6, 10e9);
  for (SweepPoint& p : sweep)
    if (p.bytes >= 1 << 24) p.seconds *= 1.2;
  std::string why_not;
  const auto fit = fit_alpha_beta(sweep, &why_not);
  ASSERT_TRUE(fit) << why_not;
  EXPECT_NEAR(fit->beta_bytes_per_s, 10e9 / 1.2, 1e3);  // 16 MiB .. 1 GiB: all 20% slower
  EXPECT_NEAR(fit->alpha_s / 5e-6, 1, 1e-3);
  EXPECT_GT(fit->rms_relative_residual, 0.01);
  // One size within 64x of the largest: no bandwidth regime.
  const std::vector<SweepPoint> gap = {{8, 1e-6}, {16, 1e-6}, {1 << 20, 1e-4}};
  EXPECT_FALSE(fit_alpha_beta(gap, &why_not));
  EXPECT_NE(why_not.find("one size within 64x of the largest"), std::string::npos) << why_not;
}

TEST(Projection, SweepTooShortToFitSaysSo) {
  std::string why_not;
  const std::vector<SweepPoint> two = {{1024, 1e-5}, {1 << 20, 1e-4}};
  EXPECT_FALSE(fit_alpha_beta(two, &why_not));
  EXPECT_NE(why_not.find("too short to fit: 2 size(s) from 1024 to 1048576 bytes"),
            std::string::npos)
      << why_not;
  const std::vector<SweepPoint> narrow = {{1024, 1e-5}, {2048, 1.1e-5}, {4096, 1.2e-5}};
  EXPECT_FALSE(fit_alpha_beta(narrow, &why_not));  // 4x: alpha and beta not separable
  EXPECT_NE(why_not.find("spanning 16x"), std::string::npos) << why_not;
  EXPECT_FALSE(fit_alpha_beta({}, &why_not));
  EXPECT_NE(why_not.find("0 size(s)"), std::string::npos) << why_not;
}

TEST(Projection, FlatSweepHasNoBandwidth) {
  std::string why_not;
  const std::vector<SweepPoint> flat = {{8, 1e-5}, {1024, 1e-5}, {1 << 20, 1e-5}, {1 << 21, 1e-5}};
  EXPECT_FALSE(fit_alpha_beta(flat, &why_not));
  EXPECT_NE(why_not.find("does not grow"), std::string::npos) << why_not;
}

// Pure bandwidth (alpha 0): the free fit may come out slightly negative; it is clamped to 0.
TEST(Projection, NegativeLatencyIsClampedToZero) {
  std::vector<SweepPoint> sweep = {{1 << 10, 0.9e-6}, {1 << 16, 64e-6}, {1 << 20, 1024e-6}};
  std::string why_not;
  const auto fit = fit_alpha_beta(sweep, &why_not);
  ASSERT_TRUE(fit);
  EXPECT_TRUE(fit->alpha_clamped);
  EXPECT_EQ(fit->alpha_s, 0);
  EXPECT_NEAR(fit->beta_bytes_per_s, 1 << 30, 0.15 * (1 << 30));
}

// T(n, S) = 2(n-1) alpha + 2(n-1)/n S / B by hand: 8 ranks, 10 us, 25 GB/s, 40 GB:
// 14 x 10 us + 14/8 x 40e9 / 25e9 = 0.00014 + 2.8 s.
TEST(Projection, RingFormulaOnHandComputedFigures) {
  const Link link{"test", 10e-6, 25e9, ""};
  EXPECT_DOUBLE_EQ(ring_all_reduce_seconds(link, 8, 40e9), 0.00014 + 2.8);
  EXPECT_DOUBLE_EQ(ring_all_reduce_seconds(link, 2, 1e9), 2 * 10e-6 + 1e9 / 25e9);
  EXPECT_DOUBLE_EQ(ring_all_reduce_seconds(link, 1, 1e9), 0);  // nothing to exchange
}

// The measured fit at n ranks, turned into a link and projected back to n, is the fit itself.
TEST(Projection, MeasuredLinkReproducesItsSweep) {
  const AlphaBetaFit fit{8e-6, 6e9, 0, 20, false};
  const Link link = measured_link(fit, 4, "measured");
  EXPECT_DOUBLE_EQ(link.bytes_per_s, 6e9 * 6 / 4);  // the bus bandwidth: algbw x 2(n-1)/n
  EXPECT_DOUBLE_EQ(link.alpha_s, 8e-6 / 6);
  for (double bytes : {8.0, 1e6, 1e9})
    EXPECT_NEAR(ring_all_reduce_seconds(link, 4, bytes), 8e-6 + bytes / 6e9, 1e-15 + 1e-12 * bytes);
}

// 10 B parameters over PCIe 4.0 x16 at 8 ranks, bandwidth term: 2 x 7/8 x 40 GB / 31.5 GB/s.
TEST(Projection, StatedLinksAndReferenceGradients) {
  const std::vector<Link> links = stated_links(0);
  ASSERT_EQ(links.size(), 5u);
  EXPECT_EQ(links[0].name, "PCIe 4.0 x16");
  EXPECT_NEAR(links[0].bytes_per_s, 31.5e9, 0.01e9);
  EXPECT_NEAR(links[1].bytes_per_s, 63.0e9, 0.02e9);
  EXPECT_EQ(links[2].bytes_per_s, 450e9);
  EXPECT_EQ(links[3].bytes_per_s, 12.5e9);
  EXPECT_EQ(links[4].bytes_per_s, 50e9);
  const std::vector<Gradients> gradients = reference_gradients();
  ASSERT_EQ(gradients.size(), 6u);
  EXPECT_EQ(gradients[2].name, "10 B fp32");
  EXPECT_EQ(gradients[2].bytes(), 40e9);
  EXPECT_EQ(gradients[3].bytes(), 20e9);
  EXPECT_EQ(gradients[5].bytes(), 350e9);
  EXPECT_NEAR(ring_all_reduce_seconds(links[0], 8, gradients[2].bytes()),
              1.75 * 40e9 / (16 * 16e9 * 128 / 130 / 8), 1e-12);
}

// step(n) = t + T - min(f T, t): no overlap adds T, full overlap hides up to the step itself.
TEST(Projection, DataParallelStepAndEfficiency) {
  const DataParallelStep none = data_parallel_step(1.0, 0.5, 0, 8);
  EXPECT_DOUBLE_EQ(none.step_s, 1.5);
  EXPECT_DOUBLE_EQ(none.efficiency, 1 / 1.5);
  EXPECT_DOUBLE_EQ(data_parallel_step(1.0, 0.5, 0.5, 8).step_s, 1.25);
  EXPECT_DOUBLE_EQ(data_parallel_step(1.0, 0.5, 0.5, 8).efficiency, 0.8);
  EXPECT_DOUBLE_EQ(data_parallel_step(1.0, 0.5, 1, 8).step_s, 1.0);  // hidden entirely
  EXPECT_DOUBLE_EQ(data_parallel_step(1.0, 2.0, 1, 8).step_s, 2.0);  // longer than the step
  EXPECT_DOUBLE_EQ(data_parallel_step(1.0, 2.0, 1, 8).efficiency, 0.5);
  EXPECT_EQ(projected_rank_counts().front(), 2);
  EXPECT_EQ(projected_rank_counts().back(), 1024);
  EXPECT_EQ(projected_rank_counts().size(), 10u);
}

nlohmann::json fixture() {
  std::ifstream in(std::string(TRAINBENCH_TEST_DATA) + "/allreduce_sweep.json");
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

// The fixture follows the collectives' report contract: a 2-rank f32 sweep (alpha 6 us,
// algbw 8 GB/s), a 3-size bf16 one, a world-size-1 one, a failed case, a model step and its
// 2-rank data-parallel result (details.data_parallel as data_parallel_training.cpp writes it).
TEST(Projection, ReadsTheReportByTheCollectivesContract) {
  const nlohmann::json report = read_report(std::string(TRAINBENCH_TEST_DATA) +
                                            "/allreduce_sweep.json");  // the schema accepts it
  const CommunicationProjection p = project_communication(report);
  ASSERT_EQ(p.sweeps.size(), 3u);
  const MeasuredSweep* f32 = nullptr;
  for (const MeasuredSweep& s : p.sweeps) {
    if (s.dtype == "f32" && s.world_size == 2) f32 = &s;
    if (s.world_size == 1) {
      EXPECT_NE(s.why_not.find("world size 1"), std::string::npos);
    }
    if (s.dtype == "bf16") {
      EXPECT_NE(s.why_not.find("too short"), std::string::npos) << s.why_not;
    }
  }
  ASSERT_TRUE(f32 && f32->fit) << (f32 ? f32->why_not : "no f32 sweep");
  EXPECT_EQ(f32->points.size(), 8u);  // the failed case is not a point
  EXPECT_NEAR(f32->fit->alpha_s, 6e-6, 1e-9);
  EXPECT_NEAR(f32->fit->beta_bytes_per_s, 8e9, 1e3);
  ASSERT_EQ(p.fabrics.size(), 1u);
  EXPECT_EQ(p.fabrics[0].name, "measured cpu-onednn");
  EXPECT_NEAR(p.fabrics[0].bytes_per_s, 8e9, 1e3);  // busbw at 2 ranks = algbw
  EXPECT_NEAR(p.links[0].alpha_s, 3e-6, 1e-9);      // the stated links take its latency
  ASSERT_EQ(p.models.size(), 1u);
  EXPECT_EQ(p.models[0].parameters, 25557032);
  EXPECT_DOUBLE_EQ(p.models[0].step_s, 2.0);
  ASSERT_TRUE(p.models[0].hidden_fraction);
  EXPECT_NEAR(*p.models[0].hidden_fraction, 0.75, 1e-12);  // 1 - (2.1 - 2.05) / 0.2
  EXPECT_EQ(p.models[0].measured_ranks, 2);  // the data-parallel result stands for the model
  EXPECT_DOUBLE_EQ(p.models[0].measured_efficiency, 2.0 / 2.1);
  EXPECT_EQ(p.models[0].gradient_bytes, 102228128);
}

TEST(Projection, AReportWithoutSweepHasNothingToFit) {
  nlohmann::json report = fixture();
  report["results"] = nlohmann::json::array();
  const CommunicationProjection p = project_communication(report);
  EXPECT_TRUE(p.sweeps.empty());
  EXPECT_TRUE(p.fabrics.empty());
  EXPECT_TRUE(p.models.empty());
}

}  // namespace
}  // namespace tb
