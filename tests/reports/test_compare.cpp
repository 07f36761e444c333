#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "reports/compare.h"
#include "reports/report.h"
#include "reports/stats.h"

namespace tb {
namespace {

std::string data(const std::string& name) {
  return std::string(TRAINBENCH_TEST_DATA) + "/" + name;
}

TEST(MannWhitney, ExactSmallSamples) {
  const std::vector<double> low = {1, 2, 3}, high = {4, 5, 6};
  RankTest test = mann_whitney(low, high);
  EXPECT_DOUBLE_EQ(test.u, 0);
  EXPECT_NEAR(test.p_value, 0.1, 1e-12);  // 2 / C(6, 3)
  EXPECT_NEAR(test.min_p, 0.1, 1e-12);
  const std::vector<double> a = {1, 2, 3, 4, 5}, b = {6, 7, 8, 9, 10};
  EXPECT_NEAR(mann_whitney(a, b).p_value, 2.0 / 252, 1e-12);
  EXPECT_NEAR(mann_whitney(b, a).p_value, 2.0 / 252, 1e-12);
  // Interleaved: no evidence either way.
  const std::vector<double> odd = {1, 3, 5, 7, 9}, even = {2, 4, 6, 8, 10};
  EXPECT_GT(mann_whitney(odd, even).p_value, 0.5);
  // One swap at the boundary: P(U <= 1) = 2 / 252, two-sided 4 / 252.
  const std::vector<double> c = {1, 2, 3, 4, 6}, d = {5, 7, 8, 9, 10};
  EXPECT_NEAR(mann_whitney(c, d).p_value, 4.0 / 252, 1e-12);
}

TEST(MannWhitney, LargeSamplesUseTheNormalApproximation) {
  std::vector<double> a, b;
  for (int i = 0; i < 40; ++i) {
    a.push_back(1.0 + 0.001 * i);
    b.push_back(1.02 + 0.001 * i);
  }
  const RankTest test = mann_whitney(a, b);
  EXPECT_GT(test.p_value, 0);
  EXPECT_LT(test.p_value, 1e-3);
  const std::vector<double> same(30, 1.0);
  EXPECT_DOUBLE_EQ(mann_whitney(same, same).p_value, 1.0);
}

TEST(MedianRatio, IntervalBracketsTheRatio) {
  const std::vector<double> a = {1, 1, 1, 1, 1}, b = {2, 2, 2, 2, 2};
  const RatioInterval exact = median_ratio(a, b);
  EXPECT_DOUBLE_EQ(exact.ratio, 2);
  EXPECT_DOUBLE_EQ(exact.low, 2);
  EXPECT_DOUBLE_EQ(exact.high, 2);
  const std::vector<double> noisy_a = {1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98},
                            noisy_b = {1.5, 1.6, 1.4, 1.55, 1.45, 1.52, 1.48};
  const RatioInterval noisy = median_ratio(noisy_a, noisy_b);
  EXPECT_LT(noisy.low, noisy.ratio);
  EXPECT_GT(noisy.high, noisy.ratio);
  EXPECT_EQ(median_ratio(noisy_a, noisy_b).low, noisy.low);  // seeded: reproducible
}

// The O(1) draw has the distribution of the median of a resample built and sorted in full.
TEST(BootstrapMedian, MatchesResamplingInFull) {
  for (std::size_t n : {1u, 2u, 7u, 50u, 101u}) {
    SCOPED_TRACE(n);
    std::mt19937_64 data(n);
    std::vector<double> samples(n);
    for (double& v : samples) v = std::exponential_distribution<double>(1.0)(data);
    const BootstrapMedian fast(samples);
    std::mt19937_64 rng(1), full_rng(2);
    std::vector<double> quick, full, resample(n);
    for (int r = 0; r < 20000; ++r) {
      quick.push_back(fast.draw(rng));
      for (double& v : resample) v = samples[full_rng() % n];
      std::sort(resample.begin(), resample.end());
      full.push_back(n % 2 ? resample[n / 2] : 0.5 * (resample[n / 2 - 1] + resample[n / 2]));
    }
    std::sort(quick.begin(), quick.end());
    std::sort(full.begin(), full.end());
    // The two distributions agree at every quantile (by probability: the medians are
    // discrete; 0.02 is 4 standard errors of the difference).
    auto fraction_at_most = [](const std::vector<double>& sorted, double value) {
      return static_cast<double>(std::upper_bound(sorted.begin(), sorted.end(), value) -
                                 sorted.begin()) /
             static_cast<double>(sorted.size());
    };
    for (double q : {0.025, 0.25, 0.5, 0.75, 0.975}) {
      const double value = full[static_cast<std::size_t>(q * (full.size() - 1))];
      EXPECT_NEAR(fraction_at_most(quick, value), fraction_at_most(full, value), 0.02) << q;
    }
  }
  // Millions of samples: one sort, not 2,000 (this took minutes before).
  std::vector<double> big(4'000'000), bigger(4'000'000);
  std::mt19937_64 data(3);
  for (std::size_t i = 0; i < big.size(); ++i) {
    big[i] = 1 + std::uniform_real_distribution<double>(0, 0.1)(data);
    bigger[i] = 1.1 * big[i];
  }
  const RatioInterval ratio = median_ratio(big, bigger);
  EXPECT_NEAR(ratio.ratio, 1.1, 1e-3);
  EXPECT_LT(ratio.low, ratio.ratio + 1e-12);
  EXPECT_GT(ratio.high, ratio.ratio - 1e-12);
  EXPECT_LT(ratio.high - ratio.low, 1e-3);
}

TEST(CompareSamples, Verdicts) {
  const std::vector<double> base = {1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99};
  std::vector<double> slower, faster, slightly;
  for (double v : base) {
    slower.push_back(v * 1.2);
    faster.push_back(v * 0.8);
    slightly.push_back(v * 1.03);
  }
  EXPECT_EQ(compare_samples(base, slower, 0.05).verdict, Verdict::slower);
  EXPECT_EQ(compare_samples(base, faster, 0.05).verdict, Verdict::faster);
  EXPECT_EQ(compare_samples(base, slightly, 0.05).verdict,
            Verdict::unchanged);  // significant but under 5%
  EXPECT_EQ(compare_samples(base, base, 0.05).verdict, Verdict::unchanged);
  const std::vector<double> three = {1, 1.01, 0.99}, three_slow = {2, 2.01, 1.99};
  EXPECT_EQ(compare_samples(three, three_slow, 0.05).verdict, Verdict::insufficient_samples);
}

Verdict verdict_of(const CheckResult& check, const std::string& workload_prefix) {
  for (const CheckEntry& entry : check.entries)
    if (entry.key.workload.rfind(workload_prefix, 0) == 0) return entry.verdict;
  ADD_FAILURE() << "no case " << workload_prefix;
  return Verdict::unchanged;
}

// One report a side: the threshold alone decides, and every comparison says significance was
// not tested.
TEST(CheckReports, CheckedInReports) {
  const nlohmann::json baseline = read_report(data("baseline.json"));
  const CheckResult same = check_reports(baseline, read_report(data("current_same.json")), 0.05);
  EXPECT_TRUE(same.passed());
  EXPECT_EQ(same.entries.size(), 3u);
  for (const CheckEntry& entry : same.entries) {
    ASSERT_TRUE(entry.comparison);
    EXPECT_FALSE(entry.comparison->tested);
    EXPECT_NE(entry.comparison->note.find("significance not tested: 1 baseline run"),
              std::string::npos)
        << entry.comparison->note;
  }

  CheckResult regressed =
      check_reports(baseline, read_report(data("current_regressed.json")), 0.05);
  EXPECT_FALSE(regressed.passed());
  EXPECT_EQ(verdict_of(regressed, "gemm m=1024"), Verdict::slower);  // 10% slower
  EXPECT_EQ(verdict_of(regressed, "stream"), Verdict::faster);       // 20% faster
  EXPECT_EQ(verdict_of(regressed, "gemm m=2048"), Verdict::new_case);
  EXPECT_EQ(verdict_of(regressed, "conv"), Verdict::lost);  // measured before, absent now
  // A 15% threshold lets the 10% slow-down through, but not the lost case unless allowed.
  CheckResult lenient = check_reports(baseline, read_report(data("current_regressed.json")), 0.15);
  EXPECT_EQ(verdict_of(lenient, "gemm m=1024"), Verdict::unchanged);
  EXPECT_FALSE(lenient.passed());
  lenient.allow_lost = true;
  EXPECT_TRUE(lenient.passed());

  const CheckResult failed =
      check_reports(baseline, read_report(data("current_failed.json")), 0.05);
  EXPECT_FALSE(failed.passed());
  EXPECT_EQ(verdict_of(failed, "gemm m=1024"), Verdict::failed);

  // Within-run samples do not count: 3 samples a side are one run a side like any other.
  const CheckResult few = check_reports(read_report(data("baseline_few_samples.json")),
                                        read_report(data("current_few_samples.json")), 0.05);
  EXPECT_FALSE(few.passed());  // 50% slower, on the threshold alone
  EXPECT_EQ(verdict_of(few, "gemm"), Verdict::slower);
}

// Not enough memory now is this machine's limit, not the code's failure: the case is lost (which
// --allow-lost accepts), keyed on its code, whether the current report wrote the code or is old
// enough that its reason's wording gives it.
TEST(CheckReports, NotEnoughMemoryNowIsLostNotFailed) {
  const nlohmann::json baseline = read_report(data("baseline.json"));
  for (const bool written : {true, false}) {
    nlohmann::json current = baseline;
    nlohmann::json& result = current["results"][1];
    result["status"] = written ? "skipped" : "failed";
    result["reason"] = "does not fit in memory: needs 9.00 GiB, 2.00 GiB available";
    if (written) result["reason_code"] = "not_enough_memory";
    result["stats"] = nullptr;
    CheckResult check = check_reports(baseline, current, 0.05);
    EXPECT_EQ(verdict_of(check, "stream"), Verdict::lost) << written;
    for (const CheckEntry& entry : check.entries) {
      if (entry.verdict != Verdict::lost) continue;
      EXPECT_EQ(entry.reason_code, ReasonCode::not_enough_memory) << written;
    }
    EXPECT_FALSE(check.passed());
    check.allow_lost = true;
    EXPECT_TRUE(check.passed()) << written;
  }
}

// A case skipped or unimplemented now, that passed in the baseline, is lost.
TEST(CheckReports, SkippedOrUnimplementedNowIsLost) {
  const nlohmann::json baseline = read_report(data("baseline.json"));
  for (const char* status : {"skipped", "unimplemented"}) {
    nlohmann::json current = baseline;
    current["results"][1]["status"] = status;
    current["results"][1]["reason"] = "backend went away";
    const CheckResult check = check_reports(baseline, current, 0.05);
    EXPECT_FALSE(check.passed()) << status;
    EXPECT_EQ(verdict_of(check, "stream"), Verdict::lost) << status;
    for (const CheckEntry& entry : check.entries) {
      if (entry.verdict != Verdict::lost) continue;
      EXPECT_NE(entry.reason.find(std::string(status) + " now: backend went away"),
                std::string::npos)
          << entry.reason;
    }
  }
}

// Reports whose results are one case each with these run medians.
std::vector<nlohmann::json> runs_with_medians(const std::vector<double>& medians) {
  const nlohmann::json base = read_report(data("baseline.json"));
  std::vector<nlohmann::json> reports;
  for (double median : medians) {
    nlohmann::json report = base;
    nlohmann::json result = base["results"][0];
    result["stats"]["median_s"] = median;
    result["samples_s"] = std::vector<double>(8, median);
    report["results"] = nlohmann::json::array({result});
    reports.push_back(report);
  }
  return reports;
}

TEST(CompareRuns, RunMediansAreTheObservations) {
  const std::vector<double> base = {1.00, 1.01, 0.99, 1.005, 0.995};
  std::vector<double> slower, faster, slightly;
  for (double v : base) {
    slower.push_back(v * 1.15);
    faster.push_back(v * 0.8);
    slightly.push_back(v * 1.02);
  }
  const RunComparison slow = compare_runs(base, slower, 0.05);
  EXPECT_EQ(slow.verdict, Verdict::slower);
  EXPECT_TRUE(slow.tested);
  EXPECT_NEAR(slow.time_ratio, 1.15, 1e-9);
  EXPECT_GT(slow.ci_low, 1.05);
  EXPECT_NEAR(slow.noise, 0.0076, 0.001);  // the spread of the run medians, pooled
  EXPECT_EQ(compare_runs(base, faster, 0.05).verdict, Verdict::faster);
  EXPECT_EQ(compare_runs(base, slightly, 0.05).verdict, Verdict::unchanged);  // under 5%
  EXPECT_EQ(compare_runs(base, base, 0.05).verdict, Verdict::unchanged);
  // Two runs a side: the noise is known but significance is not tested.
  const std::vector<double> two = {1.0, 1.01}, two_slow = {1.2, 1.21};
  const RunComparison untested = compare_runs(two, two_slow, 0.05);
  EXPECT_FALSE(untested.tested);
  EXPECT_EQ(untested.verdict, Verdict::slower);
  EXPECT_NE(untested.note.find("significance not tested"), std::string::npos);
}

// One current run against five baseline runs, as a CI job has them: judged against the
// prediction interval of the baselines, never against the threshold alone.
TEST(CompareRuns, OneCurrentRunIsJudgedAgainstThePredictionIntervalOfTheBaselines) {
  const std::vector<double> quiet = {1.00, 1.01, 0.99, 1.005, 0.995};  // 0.8% noise
  const RunComparison slow = compare_runs(quiet, std::vector<double>{1.15}, 0.05);
  EXPECT_EQ(slow.verdict, Verdict::slower);
  EXPECT_TRUE(slow.tested);
  EXPECT_GT(slow.ci_low, 1.05);
  EXPECT_NE(slow.note.find("prediction interval of 5 baseline runs"), std::string::npos)
      << slow.note;
  EXPECT_EQ(compare_runs(quiet, std::vector<double>{0.85}, 0.05).verdict, Verdict::faster);
  EXPECT_EQ(compare_runs(quiet, std::vector<double>{1.02}, 0.05).verdict, Verdict::unchanged);
  // 6% slower than the baselines' mean but inside the interval of baselines this noisy (the
  // threshold alone said "slower" to 4 of 6 identical runs at 13% noise).
  const std::vector<double> noisy = {1.0, 1.13, 0.9, 1.05, 0.95};
  const RunComparison inside = compare_runs(noisy, std::vector<double>{1.06}, 0.05);
  EXPECT_EQ(inside.verdict, Verdict::inconclusive);
  EXPECT_NE(inside.note.find("run-to-run noise"), std::string::npos) << inside.note;
  EXPECT_NE(inside.note.find("would not show"), std::string::npos) << inside.note;
  // A slow-down far outside even that interval is still found.
  EXPECT_EQ(compare_runs(noisy, std::vector<double>{2.0}, 0.05).verdict, Verdict::slower);
  // Two baselines: too few for an interval, the old rule (the threshold, unless noisy) holds.
  EXPECT_FALSE(compare_runs(std::vector<double>{1.0, 1.01}, std::vector<double>{1.2}, 0.05).tested);
}

// Noise between runs larger than half the threshold: never "slower" on a ratio that the noise
// explains, and "inconclusive" with the noise where a threshold-sized change is not excluded.
TEST(CompareRuns, NoisyRunsAreInconclusiveNotSlower) {
  const std::vector<double> base = {1.0, 1.3, 0.8, 1.1, 0.9},
                            now = {1.15, 1.4, 0.95, 1.3, 1.05};  // about 15% slower, 20% noise
  const RunComparison noisy = compare_runs(base, now, 0.05);
  EXPECT_EQ(noisy.verdict, Verdict::inconclusive);
  EXPECT_GT(noisy.noise, 0.15);
  EXPECT_NE(noisy.note.find("run-to-run noise"), std::string::npos) << noisy.note;
  std::vector<double> tripled;
  for (double v : base) tripled.push_back(3 * v);
  const RunComparison clear = compare_runs(base, tripled, 0.05);  // clearly past the threshold
  EXPECT_EQ(clear.verdict, Verdict::slower);
  EXPECT_GT(clear.ci_low, 1.05);
  EXPECT_EQ(compare_runs(base, base, 0.05).verdict, Verdict::inconclusive);  // can't tell 5%
  EXPECT_EQ(compare_runs(base, base, 0.5).verdict, Verdict::unchanged);      // can tell 50%
  const std::vector<double> two = {1.0, 1.3}, two_slow = {1.3, 1.7};
  EXPECT_EQ(compare_runs(two, two_slow, 0.05).verdict, Verdict::inconclusive);
}

TEST(CheckRuns, SeveralRunsASide) {
  const auto base = runs_with_medians({1.00, 1.01, 0.99, 1.005, 0.995});
  const auto slow = runs_with_medians({1.15, 1.16, 1.14, 1.155, 1.145});
  const CheckResult check = check_runs(base, slow, 0.05);
  ASSERT_EQ(check.entries.size(), 1u);
  EXPECT_EQ(check.entries[0].verdict, Verdict::slower);
  EXPECT_EQ(check.entries[0].comparison->baseline_runs, 5u);
  EXPECT_FALSE(check.passed());
  EXPECT_TRUE(check_runs(base, base, 0.05).passed());
  // Lost in one of the current runs is lost.
  auto partly = base;
  partly[2]["results"][0]["status"] = "skipped";
  partly[2]["results"][0]["reason"] = "backend broke";
  const CheckResult lost = check_runs(base, partly, 0.05);
  EXPECT_EQ(lost.entries[0].verdict, Verdict::lost);
  EXPECT_FALSE(lost.passed());
}

// Slower on another oneDNN is not a regression of the code: the gate names the library instead
// and passes; the same slow-down on the same libraries still fails it.
TEST(CheckRuns, ALibraryChangeIsNotCalledARegressionOfTheCode) {
  const auto base = runs_with_medians({1.00, 1.01, 0.99, 1.005, 0.995});
  auto slow = runs_with_medians({1.30, 1.31, 1.29, 1.305, 1.295});
  EXPECT_EQ(check_runs(base, slow, 0.05).entries[0].verdict, Verdict::slower);
  for (nlohmann::json& report : slow)
    for (nlohmann::json& backend : report["backends"])
      if (backend["name"] == "cpu-onednn") backend["device"]["libraries"][0]["version"] = "3.7.2";
  const CheckResult check = check_runs(base, slow, 0.05);
  ASSERT_EQ(check.entries.size(), 1u);
  EXPECT_EQ(check.entries[0].verdict, Verdict::library_changed);
  EXPECT_EQ(check.entries[0].reason, "cpu-onednn libraries: oneDNN 2.6.3 vs oneDNN 3.7.2");
  EXPECT_NEAR(check.entries[0].comparison->time_ratio, 1.30, 1e-9);
  EXPECT_TRUE(check.passed());
  // Another backend's library is not this case's.
  auto other = runs_with_medians({1.30, 1.31, 1.29, 1.305, 1.295});
  for (nlohmann::json& report : other)
    for (nlohmann::json& backend : report["backends"])
      if (backend["name"] == "cpu-openblas")
        backend["device"]["libraries"][0]["version"] = "0.3.29";
  EXPECT_EQ(check_runs(base, other, 0.05).entries[0].verdict, Verdict::slower);
  // The host's libraries are every case's.
  auto host = runs_with_medians({1.30, 1.31, 1.29, 1.305, 1.295});
  for (nlohmann::json& report : host) report["host"]["libraries"][0]["version"] = "2.41";
  const CheckResult host_check = check_runs(base, host, 0.05);
  EXPECT_EQ(host_check.entries[0].verdict, Verdict::library_changed);
  EXPECT_NE(host_check.entries[0].reason.find("host libraries: glibc 2.36"), std::string::npos);
  // Unchanged stays unchanged, whatever the libraries.
  EXPECT_EQ(check_runs(base, runs_with_medians({1.00, 1.01, 0.99, 1.005, 0.995}), 0.05)
                .entries[0]
                .verdict,
            Verdict::unchanged);
}

// On request each run contributes its fastest sample: on a loaded machine medians swing with
// the neighbours while minima hold still.
TEST(CheckRuns, TheFastestSampleOfEachRunOnRequest) {
  auto base = runs_with_medians({1.0, 1.4, 0.8, 1.2, 0.9});
  auto slow = runs_with_medians({1.1, 1.5, 0.95, 1.3, 1.0});
  for (std::size_t i = 0; i < base.size(); ++i) {
    base[i]["results"][0]["stats"]["min_s"] = 0.5 + 0.001 * static_cast<double>(i);
    slow[i]["results"][0]["stats"]["min_s"] = 0.575 + 0.001 * static_cast<double>(i);
  }
  EXPECT_EQ(check_runs(base, slow, 0.05).entries[0].verdict, Verdict::inconclusive);
  const CheckResult by_min = check_runs(base, slow, 0.05, RunStatistic::min);
  EXPECT_EQ(by_min.entries[0].verdict, Verdict::slower);
  EXPECT_NEAR(by_min.entries[0].comparison->time_ratio, 0.577 / 0.502, 1e-9);  // median minima
}

// A figure measured with reference kernels or emulated bf16 says so wherever it is shown, and
// check names a change in them between the baseline and now.
TEST(CheckReports, ReferenceKernelsAndEmulatedBf16AreShown) {
  nlohmann::json baseline = read_report(data("baseline.json"));
  nlohmann::json current = baseline;
  for (nlohmann::json& result : current["results"]) {
    if (result["status"] != "passed") continue;
    result["reference_kernels"] = {{{"op", "layer4.0.conv2 conv backward"},
                                    {"implementation", "ref:any"},
                                    {"share_of_time", 0.25}},
                                   {{"op", "fc fully_connected forward"},
                                    {"implementation", "ref:any"},
                                    {"share_of_time", nullptr}}};
    result["bf16_emulated"] = true;
  }
  const nlohmann::json& first = current["results"][0];
  EXPECT_EQ(result_caveats(read_result(first)),
            "[reference kernels: 2 ops, 25.0% of the time] [bf16 emulated]");
  EXPECT_EQ(result_caveats(read_result(baseline["results"][0])), "");
  const CheckResult check = check_reports(baseline, current, 0.05);
  ASSERT_FALSE(check.entries.empty());
  for (const CheckEntry& entry : check.entries) {
    if (entry.verdict == Verdict::lost) continue;
    EXPECT_NE(entry.caveats.find("[reference kernels: 2 ops"), std::string::npos);
    if (entry.comparison) {
      EXPECT_NE(entry.caveats.find("(baseline: none)"), std::string::npos);
    }
  }
}

// A case measured above its dtype's measured peak carries the flag, and every reader shows the
// percentage with it, never bare (the bf16 convolution at 103.9% of a 12-chain probe).
TEST(CheckReports, AFigureAboveTheMeasuredPeakIsFlagged) {
  nlohmann::json result = read_report(data("baseline.json"))["results"][0];
  result["metrics"]["percent_of_peak"] = 103.9;
  EXPECT_EQ(result_caveats(read_result(result)), "");  // the flag, not the number, says it is over
  result["metrics"]["above_measured_peak"] = true;
  EXPECT_EQ(result_caveats(read_result(result)), "[above the measured peak: 103.9%]");
  result["bf16_emulated"] = true;
  EXPECT_EQ(result_caveats(read_result(result)),
            "[bf16 emulated] [above the measured peak: 103.9%]");
}

// The first report measured otherwise than the reference, by index, with what differs.
TEST(Fingerprint, FirstConditionMismatchIsFoundByIndex) {
  const nlohmann::json baseline = read_report(data("baseline.json"));
  nlohmann::json one_thread = baseline, unpinned = baseline;
  one_thread["settings"]["threads"] = 1;
  unpinned["settings"]["pin"] = "none";
  const std::vector<nlohmann::json> reports = {baseline, one_thread, unpinned};
  EXPECT_FALSE(first_condition_mismatch(std::span(reports).first(1), baseline));
  const std::optional<ConditionMismatch> mismatch = first_condition_mismatch(reports, baseline);
  ASSERT_TRUE(mismatch);
  EXPECT_EQ(mismatch->index, 1u);
  ASSERT_EQ(mismatch->differences.size(), 1u);
  EXPECT_EQ(mismatch->differences[0].rfind("threads asked: ", 0), 0u) << mismatch->differences[0];
}

TEST(Fingerprint, DistinguishesMachines) {
  EXPECT_EQ(machine_fingerprint(read_report(data("baseline.json"))),
            machine_fingerprint(read_report(data("current_same.json"))));
  EXPECT_NE(machine_fingerprint(read_report(data("baseline.json"))),
            machine_fingerprint(read_report(data("other_machine.json"))));
}

// Threads, pinning, flush mode, sample settings and library versions are named when they
// differ.
TEST(Fingerprint, NamesTheConditionsThatDiffer) {
  const nlohmann::json baseline = read_report(data("baseline.json"));
  EXPECT_TRUE(condition_differences(baseline, read_report(data("current_same.json"))).empty());
  auto differs_in = [&](const std::function<void(nlohmann::json&)>& change,
                        const std::string& name) {
    nlohmann::json current = baseline;
    change(current);
    const std::vector<std::string> differences = condition_differences(baseline, current);
    ASSERT_EQ(differences.size(), 1u) << name;
    EXPECT_EQ(differences[0].rfind(name + ": ", 0), 0u) << differences[0];
  };
  differs_in([](nlohmann::json& r) { r["backends"][0]["device"]["threads_used"] = 1; },
             "cpu-onednn threads");
  differs_in([](nlohmann::json& r) { r["settings"]["threads"] = 1; }, "threads asked");
  differs_in([](nlohmann::json& r) { r["settings"]["pin"] = "none"; }, "pinning");
  differs_in([](nlohmann::json& r) { r["settings"]["flush_caches"] = true; }, "flush caches");
  differs_in([](nlohmann::json& r) { r["settings"]["time_budget_seconds"] = 1.0; },
             "sample settings");
  differs_in(
      [](nlohmann::json& r) { r["backends"][0]["device"]["libraries"][0]["version"] = "3.4"; },
      "cpu-onednn libraries");
  differs_in([](nlohmann::json& r) { r["host"]["libraries"][0]["version"] = "2.40"; },
             "host libraries");
  differs_in([](nlohmann::json& r) { r["host"]["cores"] = 64; }, "machine");
}

}  // namespace
}  // namespace tb
