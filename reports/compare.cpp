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

namespace {

// A VM's `model name` ("AMD EPYC") is any Zen: x86 family / model / stepping tell them apart.
// Microcode is left out (an update does not make another machine), and reports written before
// cpu_id existed have only the name.
std::string cpu_identity(const nlohmann::json& host) {
  std::string text = host.at("cpu_model").get<std::string>();
  const auto id = host.find("cpu_id");
  if (id != host.end() && id->is_object() && id->contains("part"))  // Arm: the MIDR
    return fmt::format("{} ({} implementer {} part {} variant {})", text,
                       id->value("vendor", std::string()), id->value("implementer", std::string()),
                       id->value("part", std::string()), id->value("variant", -1));
  if (id == host.end() || !id->is_object() || !id->contains("family") ||
      !id->at("family").is_number_integer())
    return text;
  return fmt::format("{} ({} family {} model {} stepping {})", text,
                     id->value("vendor", std::string()), id->at("family").get<int>(),
                     id->value("model", -1), id->value("stepping", -1));
}

}  // namespace

std::string machine_fingerprint(const nlohmann::json& report) {
  const auto& host = report.at("host");
  std::set<std::string> devices;
  for (const auto& backend : report.at("backends"))
    if (backend.contains("device") && backend["device"].is_object() &&
        backend["device"]["kind"] == "gpu")
      devices.insert(backend["device"]["model"].get<std::string>());
  return fmt::format("{} | {} sockets, {} cores, {} CPUs | {:.0f} GiB{}{}", cpu_identity(host),
                     host.at("sockets").get<int>(), host.at("cores").get<int>(),
                     host.at("logical_cpus").get<int>(),
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

std::string result_caveats(const nlohmann::json& result) {
  std::string caveats;
  if (result.contains("reference_kernels") && !result["reference_kernels"].empty()) {
    double share = 0;
    bool measured = false;
    for (const nlohmann::json& use : result["reference_kernels"])
      if (use["share_of_time"].is_number()) {
        share += use["share_of_time"].get<double>();
        measured = true;
      }
    caveats += fmt::format("[reference kernels: {} ops{}]", result["reference_kernels"].size(),
                           measured ? fmt::format(", {:.1f}% of the time", 100 * share) : "");
  }
  if (result.value("bf16_emulated", false))
    caveats += caveats.empty() ? "[bf16 emulated]" : " [bf16 emulated]";
  return caveats;
}

CheckResult check_reports(const nlohmann::json& baseline, const nlohmann::json& current,
                          double threshold) {
  std::map<CaseKey, const nlohmann::json*> base, now;
  for (const auto& result : baseline.at("results")) base[case_key(result)] = &result;
  for (const auto& result : current.at("results")) now[case_key(result)] = &result;
  CheckResult check;
  for (const auto& [key, result] : now) {
    CheckEntry entry{key, Verdict::new_case, std::nullopt, "", result_caveats(*result)};
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
      if (const std::string before = result_caveats(*it->second); before != entry.caveats)
        entry.caveats =
            fmt::format("{} (baseline: {})", entry.caveats.empty() ? "[none]" : entry.caveats,
                        before.empty() ? "none" : before);
    }
    check.entries.push_back(std::move(entry));
  }
  for (const auto& [key, result] : base)
    if ((*result)["status"] == "passed" && !now.count(key))
      check.entries.push_back({key, Verdict::missing, std::nullopt, ""});
  return check;
}

}  // namespace tb
