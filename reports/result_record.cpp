#include "reports/result_record.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "workloads/descriptor.h"

namespace tb {

namespace {

// Reports written before results carried their headline: what compare, summary and html read
// from the workload kind then.
Headline derived_headline(const nlohmann::json& result) {
  const std::string kind = descriptor_kind(result["workload"].get<std::string>());
  const std::string dtype = result.value("dtype", "");
  const nlohmann::json& m = result["metrics"];
  if (kind.starts_with("ttt-"))
    return {"time_to_train_s", "s", fmt::format("time to train {} {}", kind, dtype), true};
  if (kind == "stream") return {"gbps", "GB/s", kMemoryBandwidthFigure};
  if (kind.ends_with("-train"))
    return {"samples_per_s", "samples/s", fmt::format("{} {}", kind, dtype)};
  if (m.contains("tflops"))
    return {"tflops", "TFLOP/s", kind == "gemm" ? fmt::format("GEMM {}", dtype) : ""};
  if (m.contains("gbps")) return {"gbps", "GB/s", ""};
  return {"samples_per_s", "samples/s", ""};
}

// The code of a result written before codes, from the wording the runner gave its reason then.
ReasonCode derived_reason_code(CaseStatus status, std::string_view reason) {
  if (status == CaseStatus::passed) return ReasonCode::none;
  if (reason.starts_with("rank ")) return ReasonCode::rank_failed;  // "rank 1 (host): <its reason>"
  static constexpr std::array<std::pair<std::string_view, ReasonCode>, 13> kWordings = {{
      {"does not fit in memory", ReasonCode::not_enough_memory},
      {"of memory is available", ReasonCode::not_enough_memory},
      {"fits in the memory available", ReasonCode::not_enough_memory},
      {"would run reference kernels", ReasonCode::reference_kernels},
      {"is not usable here", ReasonCode::backend_unusable},
      {"broke during", ReasonCode::backend_broken},
      {"validation failed: ", ReasonCode::validation_failed},
      {"the timer read", ReasonCode::timer_failed},
      {"another rank failed there", ReasonCode::rank_failed},
      {"died of ", ReasonCode::crashed},
      {"the child run", ReasonCode::child_run_failed},
      {"not a positive, finite time", ReasonCode::timer_failed},
      {"a missed run counts as infinitely slow", ReasonCode::target_missed},
  }};
  for (const auto& [wording, code] : kWordings)
    if (reason.find(wording) != std::string_view::npos) return code;
  return status == CaseStatus::unimplemented ? ReasonCode::unimplemented : ReasonCode::error;
}

std::optional<SampleStats> read_stats(const nlohmann::json& stats) {
  if (!stats.is_object()) return std::nullopt;
  SampleStats s;
  s.count = stats.value("count", std::size_t{0});
  s.median = stats.value("median_s", 0.0);
  s.mean = stats.value("mean_s", 0.0);
  s.min = stats.value("min_s", 0.0);
  s.max = stats.value("max_s", 0.0);
  s.stddev = stats.value("stddev_s", 0.0);
  s.ci95_low = stats.value("ci95_low_s", 0.0);
  s.ci95_high = stats.value("ci95_high_s", 0.0);
  return s;
}

}  // namespace

std::optional<CaseStatus> parse_case_status(std::string_view name) {
  for (CaseStatus status :
       {CaseStatus::passed, CaseStatus::failed, CaseStatus::skipped, CaseStatus::unimplemented})
    if (case_status_name(status) == name) return status;
  return std::nullopt;
}

CaseKey case_key(const nlohmann::json& result) {
  return {result.at("workload").get<std::string>(), result.at("dtype").get<std::string>(),
          result.at("backend").get<std::string>()};
}

std::optional<HeadlineValue> result_headline(const nlohmann::json& result) {
  if (parse_case_status(result.value("status", "")) != CaseStatus::passed ||
      !result.contains("metrics") || !result["metrics"].is_object())
    return std::nullopt;
  HeadlineValue out;
  if (const auto stored = result.find("headline"); stored != result.end() && stored->is_object())
    out.headline = {(*stored)["metric"], (*stored)["unit"], (*stored)["figure"],
                    (*stored)["lower_is_better"]};
  else
    out.headline = derived_headline(result);
  for (const char* block : {"metrics", "details"}) {
    const auto found = result.find(block);
    if (found == result.end() || !found->is_object()) continue;
    if (const auto value = found->find(out.headline.metric);
        value != found->end() && value->is_number()) {
      out.value = value->get<double>();
      return out;
    }
  }
  return std::nullopt;
}

ResultRecord read_result(const nlohmann::json& result) {
  ResultRecord record;
  record.json = &result;
  record.key = case_key(result);
  record.status = parse_case_status(result.value("status", "")).value_or(CaseStatus::failed);
  record.reason = result.value("reason", "");
  const std::optional<ReasonCode> written = parse_reason_code(result.value("reason_code", ""));
  record.reason_code = written ? *written : derived_reason_code(record.status, record.reason);
  // Builds before target_missed wrote a missed time-to-train target as a library's failure.
  if (written == ReasonCode::library_error &&
      derived_reason_code(record.status, record.reason) == ReasonCode::target_missed)
    record.reason_code = ReasonCode::target_missed;
  if (!written && record.reason_code == ReasonCode::not_enough_memory)
    record.status = CaseStatus::skipped;  // as the runner records it now
  if (record.passed()) {
    record.stats = read_stats(result.value("stats", nlohmann::json()));
    if (const auto samples = result.find("samples_s"); samples != result.end())
      for (const nlohmann::json& sample : *samples)
        if (sample.is_number()) record.samples_s.push_back(sample.get<double>());
  }
  record.headline = result_headline(result);
  record.bf16_emulated = result.value("bf16_emulated", false);
  record.reference_kernels =
      result.contains("reference_kernels") && !result["reference_kernels"].empty();
  return record;
}

std::vector<ResultRecord> read_results(const nlohmann::json& report) {
  std::vector<ResultRecord> records;
  for (const nlohmann::json& result : report.at("results")) records.push_back(read_result(result));
  return records;
}

double ResultRecord::seconds(RunStatistic statistic) const {
  return statistic == RunStatistic::min ? stats->min : stats->median;
}

std::optional<double> ResultRecord::metric(std::string_view name) const {
  const auto metrics = json->find("metrics");
  if (metrics == json->end() || !metrics->is_object()) return std::nullopt;
  const auto value = metrics->find(name);
  if (value == metrics->end() || !value->is_number()) return std::nullopt;
  return value->get<double>();
}

std::optional<double> headline_ratio(const ResultRecord& a, const ResultRecord& b) {
  const std::optional<HeadlineValue>&ha = a.headline, &hb = b.headline;
  if (!ha || !hb || ha->headline.metric != hb->headline.metric || ha->value <= 0 || hb->value <= 0)
    return std::nullopt;
  return ha->headline.lower_is_better ? hb->value / ha->value : ha->value / hb->value;
}

}  // namespace tb
