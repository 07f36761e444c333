#include "reports/compare.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "reports/stats.h"

namespace tb {

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::faster:
      return "faster";
    case Verdict::slower:
      return "slower";
    case Verdict::unchanged:
      return "unchanged";
    case Verdict::inconclusive:
      return "inconclusive";
    case Verdict::insufficient_samples:
      return "insufficient samples";
    case Verdict::failed:
      return "failed";
    case Verdict::new_case:
      return "new";
    case Verdict::lost:
      return "lost";
    case Verdict::library_changed:
      return "library changed";
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

namespace {

std::string libraries_text(const nlohmann::json& libraries) {
  std::vector<std::string> parts;
  for (const auto& library : libraries)
    parts.push_back(fmt::format("{} {}", library.value("name", std::string("?")),
                                library.value("version", std::string("?"))));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string setting_text(const nlohmann::json& settings, const char* name) {
  const auto it = settings.find(name);
  if (it == settings.end() || it->is_null()) return "-";
  if (it->is_boolean()) return it->get<bool>() ? "on" : "off";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> run_conditions(const nlohmann::json& report) {
  std::vector<std::pair<std::string, std::string>> conditions = {
      {"machine", machine_fingerprint(report)}};
  const nlohmann::json& settings = report.at("settings");
  conditions.emplace_back("threads asked", setting_text(settings, "threads"));
  conditions.emplace_back("pinning", setting_text(settings, "pin"));
  conditions.emplace_back("flush caches", settings.contains("flush_caches")
                                              ? setting_text(settings, "flush_caches")
                                              : "off");
  conditions.emplace_back(
      "sample settings",
      fmt::format("warm-up {} runs / {} s, {}..{} samples, budget {} s, sample >= {} s",
                  setting_text(settings, "warmup_runs"), setting_text(settings, "warmup_seconds"),
                  setting_text(settings, "min_repetitions"),
                  setting_text(settings, "max_repetitions"),
                  setting_text(settings, "time_budget_seconds"),
                  setting_text(settings, "min_sample_seconds")));
  conditions.emplace_back("host libraries", libraries_text(report.at("host").value(
                                                "libraries", nlohmann::json::array())));
  for (const auto& backend : report.at("backends")) {
    if (!backend.contains("device") || !backend["device"].is_object()) continue;
    const std::string name = backend.value("name", std::string("?"));
    const nlohmann::json& device = backend["device"];
    conditions.emplace_back(name + " threads", device.contains("threads_used")
                                                   ? device["threads_used"].dump()
                                                   : std::string("-"));
    conditions.emplace_back(name + " affinity",
                            device.contains("affinity") ? device["affinity"].dump() : "-");
    conditions.emplace_back(name + " libraries",
                            libraries_text(device.value("libraries", nlohmann::json::array())));
  }
  return conditions;
}

std::vector<std::string> condition_differences(const nlohmann::json& baseline,
                                               const nlohmann::json& current) {
  std::map<std::string, std::string> before, now;
  for (auto& [name, value] : run_conditions(baseline)) before[name] = value;
  for (auto& [name, value] : run_conditions(current)) now[name] = value;
  std::vector<std::string> differences;
  // A backend that ran on one side only is not a difference in conditions: its cases are new
  // or lost, and check says so case by case.
  for (const auto& [name, value] : now)
    if (const auto it = before.find(name); it != before.end() && it->second != value)
      differences.push_back(fmt::format("{}: {} vs {}", name, it->second, value));
  return differences;
}

std::optional<ConditionMismatch> first_condition_mismatch(std::span<const nlohmann::json> reports,
                                                          const nlohmann::json& reference) {
  for (std::size_t i = 0; i < reports.size(); ++i)
    if (std::vector<std::string> differences = condition_differences(reports[i], reference);
        !differences.empty())
      return ConditionMismatch{i, std::move(differences)};
  return std::nullopt;
}

namespace {

// Of condition_differences, the libraries a case of `backend` ran on (its backend's and the
// host's): "cpu-onednn libraries: oneDNN 2.6.3 vs oneDNN 3.7.2"; empty when none differ.
std::string library_difference(const std::vector<std::string>& differences,
                               const std::string& backend) {
  std::vector<std::string> libraries;
  for (const std::string& difference : differences)
    if (difference.starts_with(backend + " libraries: ") ||
        difference.starts_with("host libraries: "))
      libraries.push_back(difference);
  return fmt::format("{}", fmt::join(libraries, "; "));
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Mean and sum of squared deviations of the logs.
std::pair<double, double> log_moments(std::span<const double> values) {
  double mean = 0;
  for (double v : values) mean += std::log(v);
  mean /= static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) squares += (std::log(v) - mean) * (std::log(v) - mean);
  return {mean, squares};
}

}  // namespace

namespace {

// One current run against several baseline runs (the usual CI job: a history of baselines, one
// run of the change): the current run's log time against the 95% prediction interval for one
// more baseline run, mean +- t(n-1) s sqrt(1 + 1/n) (Student's t, s the baselines' standard
// deviation). Past the threshold and outside the interval: slower or faster. Past the threshold
// but inside it, or within the threshold while the interval is wider than the threshold (a
// change of the threshold's size would not show): inconclusive. Otherwise unchanged.
void compare_one_current_run(std::span<const double> baseline_medians, double current,
                             double threshold, RunComparison* c) {
  const std::size_t n = baseline_medians.size();
  const auto [base_mean, base_squares] = log_moments(baseline_medians);
  const double deviation = std::sqrt(base_squares / static_cast<double>(n - 1));
  const double half_width =
      student_t_975(n - 1) * deviation * std::sqrt(1 + 1 / static_cast<double>(n));
  const double difference = std::log(current) - base_mean;
  c->tested = true;
  c->noise = std::exp(deviation) - 1;
  c->ci_low = std::exp(difference - half_width);
  c->ci_high = std::exp(difference + half_width);
  const bool beyond_slower = c->time_ratio > 1 + threshold,
             beyond_faster = c->time_ratio < 1 / (1 + threshold);
  const bool detectable = half_width < std::log(1 + threshold);
  if (beyond_slower && difference > half_width)
    c->verdict = Verdict::slower;
  else if (beyond_faster && difference < -half_width)
    c->verdict = Verdict::faster;
  else if (beyond_slower || beyond_faster || !detectable)
    c->verdict = Verdict::inconclusive;
  else
    c->verdict = Verdict::unchanged;
  c->note = fmt::format(
      "run-to-run noise {:.1f}%; one current run against the 95% prediction interval of {} "
      "baseline runs{}",
      100 * c->noise, n,
      detectable ? "" : ": wider than the threshold, so a change of its size would not show");
}

}  // namespace

RunComparison compare_runs(std::span<const double> baseline_medians,
                           std::span<const double> current_medians, double threshold) {
  RunComparison c;
  c.baseline_runs = baseline_medians.size();
  c.current_runs = current_medians.size();
  if (baseline_medians.empty() || current_medians.empty()) return c;
  c.time_ratio = median_of({current_medians.begin(), current_medians.end()}) /
                 median_of({baseline_medians.begin(), baseline_medians.end()});
  const std::size_t n = c.baseline_runs, m = c.current_runs;
  if (n >= kMinRunsTested && m == 1) {
    compare_one_current_run(baseline_medians, current_medians[0], threshold, &c);
    return c;
  }
  const bool beyond_slower = c.time_ratio > 1 + threshold,
             beyond_faster = c.time_ratio < 1 / (1 + threshold);
  const bool noise_known = n >= 2 && m >= 2;
  double mean_difference = 0, pooled = 0;
  if (noise_known) {
    const auto [base_mean, base_squares] = log_moments(baseline_medians);
    const auto [now_mean, now_squares] = log_moments(current_medians);
    pooled = std::sqrt((base_squares + now_squares) / static_cast<double>(n + m - 2));
    mean_difference = now_mean - base_mean;
    c.noise = std::exp(pooled) - 1;
  }
  const bool noisy = noise_known && c.noise > threshold / 2;
  c.tested = n >= kMinRunsTested && m >= kMinRunsTested;
  if (!c.tested) {
    c.note = fmt::format(
        "significance not tested: {} baseline run{}, {} current run{} ({} a "
        "side needed)",
        n, n == 1 ? "" : "s", m, m == 1 ? "" : "s", kMinRunsTested);
    if (noisy) {
      c.verdict = Verdict::inconclusive;
      c.note = fmt::format("run-to-run noise {:.1f}%; {}", 100 * c.noise, c.note);
    } else {
      c.verdict = beyond_slower   ? Verdict::slower
                  : beyond_faster ? Verdict::faster
                                  : Verdict::unchanged;
    }
    return c;
  }
  const double half_width = student_t_99(n + m - 2) * pooled *
                            std::sqrt(1 / static_cast<double>(n) + 1 / static_cast<double>(m));
  c.ci_low = std::exp(mean_difference - half_width);
  c.ci_high = std::exp(mean_difference + half_width);
  // Under noise over half the threshold, the interval itself must lie past the threshold: runs
  // of one build on a loaded machine differ by more than their spread suggests (neighbours'
  // load comes in bursts longer than a run), so clearing 1 is not enough there.
  const double slower_bound = noisy ? 1 + threshold : 1,
               faster_bound = noisy ? 1 / (1 + threshold) : 1;
  if (beyond_slower && c.ci_low > slower_bound)
    c.verdict = Verdict::slower;
  else if (beyond_faster && c.ci_high < faster_bound)
    c.verdict = Verdict::faster;
  else if (beyond_slower || beyond_faster ||
           (noisy && (c.ci_high > 1 + threshold || c.ci_low < 1 / (1 + threshold))))
    c.verdict = Verdict::inconclusive;
  else
    c.verdict = Verdict::unchanged;
  if (noise_known) c.note = fmt::format("run-to-run noise {:.1f}%", 100 * c.noise);
  return c;
}

std::map<CaseKey, ResultRecord> passed_results(const nlohmann::json& report) {
  std::map<CaseKey, ResultRecord> results;
  for (ResultRecord& record : read_results(report))
    if (record.passed()) results[record.key] = std::move(record);
  return results;
}

bool CheckResult::passed() const {
  for (const CheckEntry& entry : entries)
    if (entry.verdict == Verdict::slower || entry.verdict == Verdict::failed ||
        (entry.verdict == Verdict::lost && !allow_lost))
      return false;
  return true;
}

std::string result_caveats(const ResultRecord& record) {
  const nlohmann::json& result = *record.json;
  std::string caveats;
  if (record.reference_kernels) {
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
  if (record.bf16_emulated) caveats += caveats.empty() ? "[bf16 emulated]" : " [bf16 emulated]";
  if (const auto metrics = result.find("metrics"); metrics != result.end() &&
                                                   metrics->is_object() &&
                                                   metrics->value("above_measured_peak", false))
    caveats += fmt::format("{}[above the measured peak: {:.1f}%]", caveats.empty() ? "" : " ",
                           metrics->value("percent_of_peak", 0.0));
  return caveats;
}

std::string_view run_statistic_name(RunStatistic statistic) {
  return statistic == RunStatistic::min ? "min" : "median";
}

CheckResult check_runs(const std::vector<nlohmann::json>& baselines,
                       const std::vector<nlohmann::json>& currents, double threshold,
                       RunStatistic statistic) {
  // Per case: its result in every run, in run order.
  std::map<CaseKey, std::vector<ResultRecord>> base, now;
  for (const nlohmann::json& report : baselines)
    for (ResultRecord& record : read_results(report)) base[record.key].push_back(std::move(record));
  for (const nlohmann::json& report : currents)
    for (ResultRecord& record : read_results(report)) now[record.key].push_back(std::move(record));
  auto medians_of = [statistic](const std::vector<ResultRecord>& results) {
    std::vector<double> medians;  // one figure per run: its median (or fastest) sample
    for (const ResultRecord& result : results)
      if (result.passed()) medians.push_back(result.seconds(statistic));
    return medians;
  };
  const std::vector<std::string> differences =
      baselines.empty() || currents.empty()
          ? std::vector<std::string>()
          : condition_differences(baselines.front(), currents.front());
  CheckResult check;
  std::set<CaseKey> keys;
  for (const auto& [key, results] : base) keys.insert(key);
  for (const auto& [key, results] : now) keys.insert(key);
  for (const CaseKey& key : keys) {
    const auto base_it = base.find(key);
    const std::vector<double> base_medians =
        base_it == base.end() ? std::vector<double>() : medians_of(base_it->second);
    const auto now_it = now.find(key);
    const std::vector<ResultRecord> results =
        now_it == now.end() ? std::vector<ResultRecord>() : now_it->second;
    const std::vector<double> now_medians = medians_of(results);
    CheckEntry entry{key, Verdict::new_case, std::nullopt, "", ReasonCode::none, ""};
    const ResultRecord* failed = nullptr;
    const ResultRecord* not_passed = nullptr;
    for (const ResultRecord& result : results) {
      if (result.status == CaseStatus::failed && !failed) failed = &result;
      if (!result.passed() && !not_passed) not_passed = &result;
    }
    for (const ResultRecord& result : results)
      if (result.passed()) {
        entry.caveats = result_caveats(result);
        break;
      }
    if (failed) {
      entry.verdict = Verdict::failed;
      entry.reason = failed->reason;
      entry.reason_code = failed->reason_code;
    } else if (!base_medians.empty() && now_medians.size() < currents.size()) {
      entry.verdict = Verdict::lost;
      if (not_passed) entry.reason_code = not_passed->reason_code;
      entry.reason = not_passed ? fmt::format("{} now: {}", case_status_name(not_passed->status),
                                              not_passed->reason)
                                : fmt::format("absent from {} of the {} current runs",
                                              currents.size() - results.size(), currents.size());
    } else if (now_medians.empty()) {
      continue;  // neither measured before nor now
    } else if (!base_medians.empty()) {
      entry.comparison = compare_runs(base_medians, now_medians, threshold);
      entry.verdict = entry.comparison->verdict;
      if (entry.verdict == Verdict::slower || entry.verdict == Verdict::faster) {
        entry.reason = library_difference(differences, key.backend);
        if (!entry.reason.empty()) entry.verdict = Verdict::library_changed;
      }
      for (const ResultRecord& result : base_it->second)
        if (result.passed()) {
          if (const std::string before = result_caveats(result); before != entry.caveats)
            entry.caveats =
                fmt::format("{} (baseline: {})", entry.caveats.empty() ? "[none]" : entry.caveats,
                            before.empty() ? "none" : before);
          break;
        }
    }
    check.entries.push_back(std::move(entry));
  }
  return check;
}

CheckResult check_reports(const nlohmann::json& baseline, const nlohmann::json& current,
                          double threshold) {
  return check_runs({baseline}, {current}, threshold);
}

nlohmann::json to_json(const SampleComparison& c) {
  return {{"speedup", 1 / c.time_ratio},
          {"speedup_ci95", {1 / c.ci_high, 1 / c.ci_low}},
          {"time_ratio", c.time_ratio},
          {"p_value", c.p_value},
          {"min_p", c.min_p},
          {"verdict", verdict_name(c.verdict)}};
}

nlohmann::json to_json(const RunComparison& c) {
  nlohmann::json j = {{"speedup", 1 / c.time_ratio},       {"time_ratio", c.time_ratio},
                      {"baseline_runs", c.baseline_runs},  {"current_runs", c.current_runs},
                      {"significance_tested", c.tested},   {"run_to_run_noise", c.noise},
                      {"verdict", verdict_name(c.verdict)}};
  if (c.tested) j["speedup_ci98"] = {1 / c.ci_high, 1 / c.ci_low};
  if (!c.note.empty()) j["note"] = c.note;
  return j;
}

CompareGrid compare_grid(const std::vector<nlohmann::json>& reports,
                         const std::vector<std::string>& names, bool across_backends) {
  CompareGrid grid;
  auto& [columns, records, rows] = grid;
  for (const nlohmann::json& report : reports) records.push_back(read_results(report));
  for (std::size_t r = 0; r < reports.size(); ++r) {
    const std::string& name = names[r];
    std::map<std::string, std::size_t> column_of_backend;
    for (const ResultRecord& result : records[r]) {
      const std::string& backend = result.key.backend;
      std::size_t column = r;
      if (across_backends) {
        auto [it, inserted] = column_of_backend.emplace(backend, columns.size());
        if (inserted) columns.push_back({fmt::format("{}:{}", name, backend), r, backend});
        column = it->second;
      } else if (columns.size() == r) {
        columns.push_back({name, r, ""});
      }
      rows[{result.key.workload, result.key.dtype, across_backends ? "" : backend}][column] =
          &result;
    }
    if (!across_backends && columns.size() == r) columns.push_back({name, r, ""});
  }
  return grid;
}

// One report per build whose samples are the per-round medians (kept with --out-dir); a case
// that failed in any round is failed.
nlohmann::json combine_rounds(const std::vector<nlohmann::json>& rounds) {
  nlohmann::json combined = rounds.front();
  std::map<CaseKey, std::vector<ResultRecord>> by_case;
  for (const auto& report : rounds)
    for (ResultRecord& result : read_results(report))
      by_case[result.key].push_back(std::move(result));
  combined["results"] = nlohmann::json::array();
  for (const auto& [key, results] : by_case) {
    nlohmann::json merged = *results.front().json;
    std::vector<double> medians;
    for (const ResultRecord& result : results) {
      if (!result.passed()) {
        merged = *result.json;
        medians.clear();
        break;
      }
      medians.push_back(result.stats->median);
    }
    if (!medians.empty()) {
      merged["samples_s"] = medians;
      merged["stats"] = to_json(summarize(medians));
    }
    combined["results"].push_back(merged);
  }
  return combined;
}

}  // namespace tb
