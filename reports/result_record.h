// A report's result read once into a typed record, after schema validation: the one place that
// reads a result's status, reason code and statistics from JSON, and that derives what reports
// written before them lack (a reason code, a headline). compare, check, summary, html, history
// and the projection read records, never the status text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/report.h"

namespace tb {

struct CaseKey {
  std::string workload, dtype, backend;
  auto operator<=>(const CaseKey&) const = default;
};

// A result's headline figure and its value: the headline the report records, or, for a report
// written before results carried one, the one derived from the workload kind as then. Null
// where the result has no value for it (not passed, no metrics).
struct HeadlineValue {
  Headline headline;
  double value = 0;
};

enum class RunStatistic { median, min };

struct ResultRecord {
  CaseKey key;
  CaseStatus status = CaseStatus::failed;
  ReasonCode reason_code = ReasonCode::error;
  std::string reason;
  std::optional<SampleStats> stats;  // passed results only
  std::vector<double> samples_s;     // passed results: each timed sample
  std::optional<HeadlineValue> headline;
  bool bf16_emulated = false;
  bool reference_kernels = false;        // timed with reference kernels (flagged)
  const nlohmann::json* json = nullptr;  // metrics, details and ranks stay open-ended JSON

  bool passed() const { return status == CaseStatus::passed; }
  // The run's figure for the gate: its median sample or its fastest. Passed results only.
  double seconds(RunStatistic statistic) const;
  // A metric of the median sample ("tflops", "gbps", ...), where the result has it.
  std::optional<double> metric(std::string_view name) const;
};

std::optional<CaseStatus> parse_case_status(std::string_view name);
// A result's code as written, or for a report written before codes, the one its reason's wording
// gives (the runner's texts then). An old "failed" for want of memory reads as skipped.
ResultRecord read_result(const nlohmann::json& result);
// Every result of a (schema-valid) report, in order; the records point into `report`.
std::vector<ResultRecord> read_results(const nlohmann::json& report);
std::optional<HeadlineValue> result_headline(const nlohmann::json& result);
// How many times `a` beats `b` on their headline metric (throughput, or a time where lower is
// better), never on raw times: `peak dtype=bf16` runs twice the FLOPs of `peak dtype=f32` per
// unit, so their times' ratio says nothing of their speeds. Nullopt where the two have no
// common headline.
std::optional<double> headline_ratio(const ResultRecord& a, const ResultRecord& b);
CaseKey case_key(const nlohmann::json& result);

}  // namespace tb
