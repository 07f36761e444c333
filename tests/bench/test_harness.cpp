// The harness's contract, on a workload that counts what the harness asks of it.
#include <gtest/gtest.h>

#include <thread>

#include "backends/registry.h"
#include "bench/harness.h"
#include "bench/runner.h"

namespace tb {
namespace {

class CountingWorkload final : public Workload {
 public:
  CountingWorkload(double unit_seconds, bool feeds_back)
      : unit_seconds_(unit_seconds), feeds_back_(feeds_back) {}
  Descriptor descriptor() const override { return Descriptor("counting"); }
  DType dtype() const override { return DType::f32; }
  WorkCounts counts() const override { return {}; }
  std::uint64_t device_bytes() const override { return 0; }
  Status setup(Backend&, std::uint64_t) override { return Status::Ok(); }
  Status run() override {
    ++runs;
    if (feeds_back_ && !fresh) return Status::Failed("ran twice without reset");
    fresh = false;
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(unit_seconds_);
    while (std::chrono::steady_clock::now() < until) {
    }
    return runs == fail_at ? Status::Failed("device lost") : Status::Ok();
  }
  Validation validate() override { return {}; }
  bool output_feeds_back() const override { return feeds_back_; }
  Status reset() override {
    ++resets;
    fresh = true;
    return Status::Ok();
  }
  std::string implementation() const override { return "spin"; }
  std::string math_mode() const override { return ""; }
  std::vector<ReferenceKernelUse> reference_kernels() const override { return {}; }
  bool emulates_bf16() const override { return false; }

  int runs = 0, resets = 0, fail_at = -1;
  bool fresh = true;

 private:
  double unit_seconds_;
  bool feeds_back_;
};

class Harness : public testing::Test {
 protected:
  void SetUp() override {
    const BackendEntry* entry = find_backend("cpu-onednn");
    if (!entry) GTEST_SKIP() << "no CPU backend in this build";
    ASSERT_TRUE(entry->create(BackendConfig{}, &backend_).ok());
  }
  std::unique_ptr<Backend> backend_;
};

TEST_F(Harness, MinimumRepetitionsEvenWithoutBudget) {
  CountingWorkload workload(1e-4, false);
  HarnessConfig config{1, 0, 7, 100, 0, 0};
  Measurement m;
  ASSERT_TRUE(measure(workload, *backend_, config, &m).ok());
  EXPECT_EQ(m.samples_s.size(), 7u);
  EXPECT_EQ(m.units_per_sample, 1);
  EXPECT_GE(m.warmup_runs, 1);
  for (double s : m.samples_s) EXPECT_GE(s, 1e-4);
}

TEST_F(Harness, BudgetAddsSamplesUpToTheMaximum) {
  CountingWorkload workload(1e-4, false);
  HarnessConfig config{1, 0, 3, 40, 10.0, 0};
  Measurement m;
  ASSERT_TRUE(measure(workload, *backend_, config, &m).ok());
  EXPECT_EQ(m.samples_s.size(), 40u);  // the maximum ends it long before the budget
}

TEST_F(Harness, ShortUnitsAreBatchedIntoSamples) {
  CountingWorkload workload(2e-5, false);
  HarnessConfig config{2, 0, 5, 5, 0, 1e-3};
  Measurement m;
  ASSERT_TRUE(measure(workload, *backend_, config, &m).ok());
  EXPECT_GT(m.units_per_sample, 10);
  EXPECT_EQ(workload.runs, m.warmup_runs + 5 * m.units_per_sample);
  for (double s : m.samples_s) EXPECT_GE(s, 2e-5);  // per unit, not per sample
}

TEST_F(Harness, OutputThatFeedsBackIsResetBeforeEverySampleAndTimedAlone) {
  CountingWorkload workload(2e-5, true);
  HarnessConfig config{2, 0, 6, 6, 0, 1e-3};
  Measurement m;
  ASSERT_TRUE(measure(workload, *backend_, config, &m).ok());  // run() fails without a reset
  EXPECT_EQ(m.units_per_sample, 1);
  EXPECT_EQ(workload.resets, workload.runs);
}

TEST_F(Harness, FlushingCachesTimesOneUnitPerSample) {
  CountingWorkload workload(2e-5, false);
  HarnessConfig config{1, 0, 4, 4, 0, 1e-3};
  config.flush_caches = true;
  Measurement m;
  ASSERT_TRUE(measure(workload, *backend_, config, &m).ok());
  EXPECT_EQ(m.units_per_sample, 1);  // batching would warm the caches again
  EXPECT_EQ(m.samples_s.size(), 4u);
  EXPECT_TRUE(backend_->flush_caches().ok());  // the buffer is kept and reused
}

TEST_F(Harness, AFailingRunEndsTheMeasurementWithItsStatus) {
  CountingWorkload workload(1e-5, false);
  workload.fail_at = 4;
  Measurement m;
  const Status status = measure(workload, *backend_, HarnessConfig{1, 0, 10, 10, 0, 0}, &m);
  EXPECT_EQ(status.code(), StatusCode::failed);
  EXPECT_EQ(status.message(), "device lost");
}

// A case's seed depends on --seed and its descriptor line only, never on its position.
TEST(CaseSeed, FollowsTheSeedAndTheDescriptor) {
  const std::string gemm = "gemm m=64 n=64 k=64 dtype=f32";
  EXPECT_EQ(case_seed(42, gemm), case_seed(42, gemm));
  EXPECT_NE(case_seed(42, gemm), case_seed(43, gemm));
  EXPECT_NE(case_seed(42, gemm), case_seed(42, "gemm m=64 n=64 k=65 dtype=f32"));
  EXPECT_NE(case_seed(42, gemm) + 1, case_seed(43, gemm));  // mixed, not offset
}

}  // namespace
}  // namespace tb
