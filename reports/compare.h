// Comparing reports: cases matched by (workload, dtype, backend), speed ratios with bootstrap
// intervals, Mann-Whitney significance, and the regression verdict `check` and `ab` gate on.
#pragma once

#include <compare>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/result_record.h"

namespace tb {

enum class Verdict {
  faster,
  slower,
  unchanged,
  inconclusive,  // check: the run-to-run noise is too large to tell a change of the threshold
  insufficient_samples,
  failed,
  new_case,
  lost,             // check: measured in the baseline, skipped / unimplemented / absent now
  library_changed,  // check: faster or slower, but a library it ran on differs: not the code's
};
std::string_view verdict_name(Verdict verdict);

struct SampleComparison {
  double time_ratio = 0, ci_low = 0, ci_high = 0;  // current / baseline median time, 95% interval
  double p_value = 1, min_p = 1;
  Verdict verdict = Verdict::unchanged;
};

inline constexpr double kSignificance = 0.05;

// slower / faster: the median time moved by more than `threshold` (0.05 = 5%) and the
// Mann-Whitney test says the difference is significant; insufficient_samples when these set
// sizes can never reach significance (3 against 3).
SampleComparison compare_samples(std::span<const double> baseline, std::span<const double> current,
                                 double threshold);

// What identifies a machine: CPU model, sockets, cores, logical CPUs, memory (GiB) and the
// devices of the backends that ran.
std::string machine_fingerprint(const nlohmann::json& report);

// What else a timing depends on, by name: the machine, each backend's threads, affinity and
// libraries, the host's libraries, pinning, flush mode and the sample settings.
std::vector<std::pair<std::string, std::string>> run_conditions(const nlohmann::json& report);
// The conditions that differ, one "NAME: BASELINE vs CURRENT" each; empty when none do.
std::vector<std::string> condition_differences(const nlohmann::json& baseline,
                                               const nlohmann::json& current);
// The first of `reports` measured under other conditions than `reference`, by index, with what
// differs; nullopt when every one agrees.
struct ConditionMismatch {
  std::size_t index = 0;
  std::vector<std::string> differences;
};
std::optional<ConditionMismatch> first_condition_mismatch(std::span<const nlohmann::json> reports,
                                                          const nlohmann::json& reference);

// The gate's comparison of one case across runs: each run's median is one observation, since
// samples within a run are not independent of the run (its clock, its placement, its
// neighbours). time_ratio is the current runs' median median over the baseline runs'; the
// interval is a two-sided 98% t-interval on the log medians (so each side is a one-sided 1%
// test), tested only with at least kMinRunsTested runs a side. noise is the run-to-run
// standard deviation of the log medians, pooled over both sides (0 when either side has one
// run). Verdicts:
//   slower / faster: the ratio passes the threshold and the interval excludes 1 (with noise
//     over half the threshold: the interval lies past the threshold); untested, the ratio
//     alone decides, unless the noise is over half the threshold;
//   inconclusive: the noise is over half the threshold and neither a change past the threshold
//     nor its absence is shown (untested, or the interval reaches past the threshold), or the
//     ratio passes the threshold but the interval holds 1;
//   unchanged: otherwise.
// With kMinRunsTested baseline runs or more and one current run (a CI job's history against
// one run of the change), the current run is judged against the 95% prediction interval of one
// more baseline run instead: slower / faster past the threshold and outside the interval;
// inconclusive past the threshold inside it, or where the interval is wider than the threshold.
// check_runs then turns slower / faster into library_changed where a library differs (a new
// oneDNN, another OpenBLAS kernel): the gate cannot tell that from a change of the code.
inline constexpr std::size_t kMinRunsTested = 3;
struct RunComparison {
  std::size_t baseline_runs = 0, current_runs = 0;
  double time_ratio = 1, ci_low = 0, ci_high = 0;  // ci only when tested
  bool tested = false;
  double noise = 0;
  Verdict verdict = Verdict::unchanged;
  std::string note;  // "significance not tested: 1 baseline run", "run-to-run noise 12.0%"
};
RunComparison compare_runs(std::span<const double> baseline_medians,
                           std::span<const double> current_medians, double threshold);

// What a reader of a result's figure must know: the reference kernels it ran (how many ops,
// their share of the time where measured) and emulated bf16; empty when neither.
// "[reference kernels: 2 ops, 12.3% of the time] [bf16 emulated]"
std::string result_caveats(const ResultRecord& result);

struct CheckEntry {
  CaseKey key;
  Verdict verdict = Verdict::unchanged;
  std::optional<RunComparison> comparison;
  std::string reason;                         // failed, lost and library_changed cases: why
  ReasonCode reason_code = ReasonCode::none;  // failed and lost cases: the current run's code
  std::string caveats = {};  // result_caveats of the current result (and the baseline's)
};

struct CheckResult {
  std::vector<CheckEntry> entries;
  bool allow_lost = false;  // lost cases do not fail the check
  bool passed() const;      // no regression, no failed case, no lost case unless allowed
};

// The CI gate: every case of the baseline runs and the current runs, classified. A case that
// failed in any current run is failed; one that passed in a baseline run and did not pass in
// every current run (skipped, unimplemented, absent) is lost.
// What one run contributes: its median sample (the default), or its fastest, which on a loaded
// machine is the one its neighbours disturbed least (measured here with one thread: 1.5%
// run-to-run noise for the minimum against 40-60% for the median).
std::string_view run_statistic_name(RunStatistic statistic);
CheckResult check_runs(const std::vector<nlohmann::json>& baselines,
                       const std::vector<nlohmann::json>& currents, double threshold,
                       RunStatistic statistic = RunStatistic::median);
// One report a side: the threshold alone decides, and the entries say so.
CheckResult check_reports(const nlohmann::json& baseline, const nlohmann::json& current,
                          double threshold);

// Passed results of a report by key.
std::map<CaseKey, ResultRecord> passed_results(const nlohmann::json& report);

// A comparison as `compare` and `check` write it in JSON.
nlohmann::json to_json(const SampleComparison& c);
nlohmann::json to_json(const RunComparison& c);

// Columns of the comparison: one per report, or one per (report, backend) across backends.
struct Column {
  std::string label;
  std::size_t report;
  std::string backend;  // empty: any
};
using RowKey =
    std::tuple<std::string, std::string, std::string>;  // workload, dtype, backend ("" across)

// The columns, and per row (a case) the result each column has for it.
struct CompareGrid {
  std::vector<Column> columns;
  std::vector<std::vector<ResultRecord>> records;  // per report; the rows point into them
  std::map<RowKey, std::map<std::size_t, const ResultRecord*>> rows;
};

// The grid of `compare`: reports[r] is named names[r]; across_backends makes a column per
// (report, backend) and a row per (workload, dtype).
CompareGrid compare_grid(const std::vector<nlohmann::json>& reports,
                         const std::vector<std::string>& names, bool across_backends);

// `ab`'s rounds of one build as one report whose samples are the per-round medians; a case that
// failed in any round is failed.
nlohmann::json combine_rounds(const std::vector<nlohmann::json>& rounds);

}  // namespace tb
