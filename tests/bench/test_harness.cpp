// The harness's contract, on a workload that counts what the harness asks of it.
#include <gtest/gtest.h>

#include <thread>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "backends/registry.h"
#include "bench/harness.h"
#include "bench/inventory.h"
#include "bench/runner.h"
#include "tests/forwarding_backend.h"

namespace tb {
namespace {

class CountingWorkload final : public Workload {
 public:
  CountingWorkload(double unit_seconds, bool feeds_back)
      : unit_seconds_(unit_seconds), feeds_back_(feeds_back) {}
  Descriptor descriptor() const override { return Descriptor("counting"); }
  DType dtype() const override { return DType::f32; }
  WorkCounts counts() const override { return {}; }
  Headline headline() const override { return {"samples_per_s", "samples/s", ""}; }
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

TEST_F(Harness, TheWarmupCountIsRunEvenWithoutBudget) {
  CountingWorkload workload(1e-4, false);
  HarnessConfig config{4, 10.0, 1, 1, 0, 0};  // warm-up time beyond the count is cut by the budget
  Measurement m;
  ASSERT_TRUE(measure(workload, *backend_, config, &m).ok());
  EXPECT_EQ(m.warmup_runs, 4);
  EXPECT_EQ(workload.runs, 5);
}

TEST_F(Harness, WarmupTimeBeyondTheCountStopsAtTheBudget) {
  // 0.1 ms units against a 0.2 s budget: more than one warm-up run unless the machine stalls
  // this process for 0.2 s; the 10 s asked are cut long before the 5 s bound below.
  CountingWorkload workload(1e-4, false);
  HarnessConfig config{1, 10.0, 1, 1, 0.2, 0};
  Measurement m;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(measure(workload, *backend_, config, &m).ok());
  EXPECT_GT(m.warmup_runs, 1);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

TEST_F(Harness, ShortUnitsAreBatchedIntoSamples) {
  CountingWorkload workload(2e-5, false);
  // The fastest of 20 warm-up runs sizes the sample: one run can be stretched past 1 ms by
  // a preempted core on a shared machine, twenty of them cannot.
  HarnessConfig config{20, 0, 5, 5, 0, 1e-3};
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

// Logs the timer's and the backend's calls, and can make every sample read `forced_seconds`.
class RecordingBackend final : public testing_support::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void synchronize() override {
    log.push_back("wait");
    ForwardingBackend::synchronize();
  }
  std::unique_ptr<Timer> make_timer() override {
    return std::make_unique<RecordingTimer>(real_.make_timer(), this);
  }
  std::vector<std::string> log;
  std::optional<double> forced_seconds;

 private:
  class RecordingTimer final : public Timer {
   public:
    RecordingTimer(std::unique_ptr<Timer> real, RecordingBackend* owner)
        : real_(std::move(real)), owner_(owner) {}
    void start() override {
      owner_->log.push_back("start");
      real_->start();
    }
    void stop() override {
      owner_->log.push_back("record stop");
      real_->stop();
    }
    double elapsed_seconds() override {
      owner_->log.push_back("wait for stop");
      const double seconds = real_->elapsed_seconds();
      return owner_->forced_seconds.value_or(seconds);
    }

   private:
    std::unique_ptr<Timer> real_;
    RecordingBackend* owner_;
  };
};

class LoggingWorkload final : public Workload {
 public:
  explicit LoggingWorkload(std::vector<std::string>* log) : log_(log) {}
  Descriptor descriptor() const override { return Descriptor("logging"); }
  DType dtype() const override { return DType::f32; }
  WorkCounts counts() const override { return {}; }
  Headline headline() const override { return {"samples_per_s", "samples/s", ""}; }
  std::uint64_t device_bytes() const override { return 0; }
  Status setup(Backend&, std::uint64_t) override { return Status::Ok(); }
  Status run() override {
    log_->push_back("run");
    return Status::Ok();
  }
  Validation validate() override { return {}; }
  std::string implementation() const override { return "log"; }
  std::string math_mode() const override { return ""; }
  std::vector<ReferenceKernelUse> reference_kernels() const override { return {}; }
  bool emulates_bf16() const override { return false; }

 private:
  std::vector<std::string>* log_;
};

// The end of a sample is recorded right after its last unit is launched, before anything
// waits: a GPU sample then holds the device's time only, not the host's wake-up.
TEST_F(Harness, TheStopIsRecordedBeforeAnythingWaits) {
  RecordingBackend recording(*backend_);
  LoggingWorkload workload(&recording.log);
  for (bool flush : {false, true}) {
    recording.log.clear();
    HarnessConfig config{2, 0, 3, 3, 10.0, 0};
    config.flush_caches = flush;
    Measurement m;
    ASSERT_TRUE(measure(workload, recording, config, &m).ok());
    int samples = 0;
    for (std::size_t i = 0; i < recording.log.size(); ++i) {
      if (recording.log[i] != "record stop") continue;
      ++samples;
      EXPECT_EQ(recording.log[i - 1], "run") << "entry " << i;
      ASSERT_LT(i + 1, recording.log.size());
      EXPECT_EQ(recording.log[i + 1], "wait for stop") << "entry " << i;
    }
    EXPECT_EQ(samples, 2 + 3);  // warm-up runs and samples
  }
}

// A time that is not positive and finite fails the case with the reason; it is never a sample.
TEST_F(Harness, ANonFiniteOrNonPositiveSampleFailsTheCase) {
  RecordingBackend recording(*backend_);
  LoggingWorkload workload(&recording.log);
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), 0.0, -1e-3,
                     std::numeric_limits<double>::infinity()}) {
    recording.forced_seconds = bad;
    Measurement m;
    const Status status = measure(workload, recording, HarnessConfig{1, 0, 3, 3, 0, 0}, &m);
    EXPECT_EQ(status.code(), StatusCode::failed) << bad;
    EXPECT_NE(status.message().find("not a positive, finite time"), std::string::npos)
        << status.message();
  }
}

// The case during which a backend breaks fails with the reason; the runner skips its later
// cases (their results say why) and exits 1.
// A backend whose probe for a dtype is no ceiling (the cuda backend's mma.sync probes on
// Hopper): the probe's figure is kept beside the reason, and no measured peak is claimed, so
// no percent of it can be printed above 100.
class ProbeBelowCeiling final : public testing_support::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  DeviceInfo device_info() const override {
    DeviceInfo info = ForwardingBackend::device_info();
    info.probe_below_ceiling["f32"] = "the probe uses slower instructions than the libraries";
    return info;
  }
};

TEST_F(Harness, AProbeThatIsNoCeilingIsKeptButNotAPeak) {
  ProbeBelowCeiling backend(*backend_);
  HarnessConfig quick;
  quick.time_budget_seconds = 0;
  quick.min_repetitions = 1;
  const std::map<std::string, PeakRate> peaks = measure_peaks(backend, quick);
  const PeakRate& f32 = peaks.at("f32");
  EXPECT_FALSE(f32.measured_gflops.has_value());
  ASSERT_TRUE(f32.probe_gflops.has_value());
  EXPECT_GT(*f32.probe_gflops, 0);
  EXPECT_NE(f32.reason.find("slower instructions"), std::string::npos) << f32.reason;
  const std::map<std::string, PeakRate> read = peaks_from_json(peaks_json(peaks));
  EXPECT_EQ(read.at("f32").probe_gflops, f32.probe_gflops);
  EXPECT_FALSE(read.at("f32").measured_gflops.has_value());
  EXPECT_EQ(read.at("f32").reason, f32.reason);
  // The plain backend's f32 probe is its ceiling.
  EXPECT_TRUE(measure_peaks(*backend_, quick).at("f32").measured_gflops.has_value());
}

TEST(BackendBreakage, TheCaseThatBrokeItFailsAndItIsRemembered) {
  std::string broken;
  CaseResult passed;
  passed.status = CaseStatus::passed;
  passed.samples_s = {1e-3};
  account_for_breakage("", &broken, &passed);
  EXPECT_EQ(passed.status, CaseStatus::passed);
  EXPECT_TRUE(broken.empty());

  account_for_breakage("cudaLaunchKernel failed with a sticky error", &broken, &passed);
  EXPECT_EQ(passed.status, CaseStatus::failed);
  EXPECT_NE(passed.reason.find("broke during this case: cudaLaunchKernel"), std::string::npos);
  EXPECT_TRUE(passed.samples_s.empty());
  EXPECT_EQ(broken, "cudaLaunchKernel failed with a sticky error");

  CaseResult later;  // already skipped by the runner: its own result stands
  later.status = CaseStatus::skipped;
  account_for_breakage("cudaLaunchKernel failed with a sticky error", &broken, &later);
  EXPECT_EQ(later.status, CaseStatus::skipped);
}

// A case's seed depends on --seed and its descriptor line only, never on its position.
TEST(CaseSeed, FollowsTheSeedAndTheDescriptor) {
  const std::string gemm = "gemm m=64 n=64 k=64 dtype=f32";
  EXPECT_EQ(case_seed(42, gemm), case_seed(42, gemm));
  EXPECT_NE(case_seed(42, gemm), case_seed(43, gemm));
  EXPECT_NE(case_seed(42, gemm), case_seed(42, "gemm m=64 n=64 k=65 dtype=f32"));
  EXPECT_NE(case_seed(42, gemm) + 1, case_seed(43, gemm));  // mixed, not offset
}

// ---- across ranks: every decision taken once, from the slowest rank's clock ----

// Rank 0 of two whose peer is always `behind` seconds slower: the largest of the ranks' values
// is this rank's plus `behind`. Records what the harness asked and answered.
class PeerBehindWorld final : public World {
 public:
  explicit PeerBehindWorld(double behind) : behind_(behind) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 2; }
  std::string host() const override { return "test"; }
  bool launched() const override { return true; }
  std::string library() const override { return "none (a test's two ranks)"; }
  Status broadcast_bytes(void*, std::size_t, int) override { return Status::Ok(); }
  std::vector<std::string> gather(const std::string& mine, int) override { return {mine, mine}; }
  double max(double value) override {
    answers.push_back(value + behind_);
    return answers.back();
  }
  double sum(double value) override { return 2 * value; }
  Status barrier() override { return Status::Ok(); }
  [[noreturn]] void abort(const std::string&, int) override { std::abort(); }
  std::unique_ptr<Communicator> host_communicator() override { return nullptr; }

  std::vector<double> answers;

 private:
  double behind_;
};

// Locally a 20 us unit would be batched 50 to a sample, warmed up for 0.3 s and sampled for
// 0.5 s. The peer is a second behind: every budget is spent at once, so both ranks run exactly
// the counts, one unit per sample, each sample the peer's time.
TEST_F(Harness, AcrossRanksEveryDecisionIsTheSlowestRanks) {
  CountingWorkload workload(2e-5, false);
  HarnessConfig config{2, 0.3, 5, 1000, 0.5, 1e-3};
  PeerBehindWorld peer(1.0);
  Measurement m;
  ASSERT_TRUE(measure(workload, *backend_, config, &m, &peer).ok());
  EXPECT_EQ(m.warmup_runs, 2);
  EXPECT_EQ(m.units_per_sample, 1);
  ASSERT_EQ(m.samples_s.size(), 5u);
  for (double s : m.samples_s) {
    EXPECT_GE(s, 1.0);  // the peer's time, not this rank's 20 us
    EXPECT_NE(std::find(peer.answers.begin(), peer.answers.end(), s), peer.answers.end());
  }
  EXPECT_EQ(workload.runs, 7);
  // The same workload alone decides on its own clock: more warm-up, batched units, more samples.
  CountingWorkload alone(2e-5, false);
  ASSERT_TRUE(measure(alone, *backend_, {2, 0.2, 5, 1000, 0.05, 1e-3}, &m).ok());
  EXPECT_GT(m.warmup_runs, 2);
  EXPECT_GT(m.units_per_sample, 1);
}

// A rank whose timer read nothing usable fails the case on every rank, not on its own.
TEST_F(Harness, AcrossRanksAnUnusableTimeOnAnyRankFailsEveryRank) {
  CountingWorkload workload(1e-4, false);
  PeerBehindWorld peer(INFINITY);
  Measurement m;
  const Status status = measure(workload, *backend_, {1, 0, 3, 3, 0, 0}, &m, &peer);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("another rank"), std::string::npos) << status.message();
  EXPECT_EQ(workload.runs, 1);
}

}  // namespace
}  // namespace tb
