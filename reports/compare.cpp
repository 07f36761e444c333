#include "reports/compare.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "reports/stats.h"

namespace tb {

CaseKey case_key(const nlohmann::json& result) {
  return {result.at("workload").get<std::string>(), result.at("dtype").get<std::string>(),
          result.at("backend").get<std::string>()};
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::faster:
      return "faster";
    case Verdict::slower:
      return "slower";
    case Verdict::unchanged:
      return "unchanged";
    case Verdict::insufficient_samples:
      return "insufficient samples";
    case Verdict::failed:
      return "failed";
    case Verdict::new_case:
      return "new";
    case Verdict::missing:
      return "missing";
  }
  return "?";
}

SampleComparison compare_samples(std::span<const double> baseline, std::span<const double> current,
                                 double threshold) {
  SampleComparison result;
  const RatioInterval ratio = median_ratio(baseline, current);
  result.time_ratio = ratio.ratio;
  result.ci_low = ratio.low;
  result.ci_high = ratio.high;
  const RankTest test = mann_whitney(baseline, current);
  result.p_value = test.p_value;
  result.min_p = test.min_p;
  if (test.min_p >= kSignificance)
    result.verdict = Verdict::insufficient_samples;
  else if (test.p_value < kSignificance && ratio.ratio > 1 + threshold)
    result.verdict = Verdict::slower;
  else if (test.p_value < kSignificance && ratio.ratio < 1 / (1 + threshold))
    result.verdict = Verdict::faster;
  else
    result.verdict = Verdict::unchanged;
  return result;
}

std::string machine_fingerprint(const nlohmann::json& report) {
  const auto& host = report.at("host");
  std::set<std::string> devices;
  for (const auto& backend : report.at("backends"))
    if (backend.contains("device") && backend["device"].is_object() &&
        backend["device"]["kind"] == "gpu")
      devices.insert(backend["device"]["model"].get<std::string>());
  return fmt::format("{} | {} sockets, {} cores, {} CPUs | {:.0f} GiB{}{}",
                     host.at("cpu_model").get<std::string>(), host.at("sockets").get<int>(),
                     host.at("cores").get<int>(), host.at("logical_cpus").get<int>(),
                     host.at("memory_bytes").get<double>() / (1 << 30),
                     devices.empty() ? "" : " | ", fmt::join(devices, ", "));
}

std::map<CaseKey, const nlohmann::json*> passed_results(const nlohmann::json& report) {
  std::map<CaseKey, const nlohmann::json*> results;
  for (const auto& result : report.at("results"))
    if (result.at("status") == "passed") results[case_key(result)] = &result;
  return results;
}

bool CheckResult::passed() const {
  for (const CheckEntry& entry : entries)
    if (entry.verdict == Verdict::slower || entry.verdict == Verdict::failed) return false;
  return true;
}

CheckResult check_reports(const nlohmann::json& baseline, const nlohmann::json& current,
                          double threshold) {
  std::map<CaseKey, const nlohmann::json*> base, now;
  for (const auto& result : baseline.at("results")) base[case_key(result)] = &result;
  for (const auto& result : current.at("results")) now[case_key(result)] = &result;
  CheckResult check;
  for (const auto& [key, result] : now) {
    CheckEntry entry{key, Verdict::new_case, std::nullopt, ""};
    const std::string status = (*result)["status"];
    if (status == "failed") {
      entry.verdict = Verdict::failed;
      entry.reason = (*result)["reason"];
    } else if (status != "passed") {
      continue;  // skipped / unimplemented in the current run: nothing measured
    } else if (auto it = base.find(key); it != base.end() && (*it->second)["status"] == "passed") {
      const auto base_samples = (*it->second)["samples_s"].get<std::vector<double>>();
      const auto now_samples = (*result)["samples_s"].get<std::vector<double>>();
      entry.comparison = compare_samples(base_samples, now_samples, threshold);
      entry.verdict = entry.comparison->verdict;
    }
    check.entries.push_back(std::move(entry));
  }
  for (const auto& [key, result] : base)
    if ((*result)["status"] == "passed" && !now.count(key))
      check.entries.push_back({key, Verdict::missing, std::nullopt, ""});
  return check;
}

}  // namespace tb
