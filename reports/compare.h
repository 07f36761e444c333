// Comparing reports: cases matched by (workload, dtype, backend), speed ratios with bootstrap
// intervals, Mann-Whitney significance, and the regression verdict `check` and `ab` gate on.
#pragma once

#include <compare>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb {

struct CaseKey {
  std::string workload, dtype, backend;
  auto operator<=>(const CaseKey&) const = default;
};
CaseKey case_key(const nlohmann::json& result);

enum class Verdict { faster, slower, unchanged, insufficient_samples, failed, new_case, missing };
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

// What a reader of a result's figure must know: the reference kernels it ran (how many ops,
// their share of the time where measured) and emulated bf16; empty when neither.
// "[reference kernels: 2 ops, 12.3% of the time] [bf16 emulated]"
std::string result_caveats(const nlohmann::json& result);

struct CheckEntry {
  CaseKey key;
  Verdict verdict = Verdict::unchanged;
  std::optional<SampleComparison> comparison;
  std::string reason;        // for failed cases
  std::string caveats = {};  // result_caveats of the current result (and the baseline's)
};

struct CheckResult {
  std::vector<CheckEntry> entries;
  bool passed() const;  // no regression, no failed case
};

// The CI gate: every case of both reports, classified.
CheckResult check_reports(const nlohmann::json& baseline, const nlohmann::json& current,
                          double threshold);

// Passed results of a report by key.
std::map<CaseKey, const nlohmann::json*> passed_results(const nlohmann::json& report);

}  // namespace tb
