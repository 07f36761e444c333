#include "reports/report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "backends/status.h"
#include "reports/json_schema.h"
#include "reports/result_record.h"
#include "workloads/descriptor.h"
#include "workloads/embedded_files.h"

namespace fs = std::filesystem;

namespace tb {

std::string_view case_status_name(CaseStatus status) {
  switch (status) {
    case CaseStatus::passed:
      return "passed";
    case CaseStatus::failed:
      return "failed";
    case CaseStatus::skipped:
      return "skipped";
    case CaseStatus::unimplemented:
      return "unimplemented";
  }
  return "failed";
}

std::string_view case_stage_name(CaseStage stage) {
  switch (stage) {
    case CaseStage::setup:
      return "setup";
    case CaseStage::validation:
      return "validation";
    case CaseStage::breakdown:
      return "breakdown";
    case CaseStage::warmup:
      return "warmup";
    case CaseStage::timing:
      return "timing";
  }
  return "unknown";
}

nlohmann::json to_json(const CaseResult& r) {
  nlohmann::json j;
  j["workload"] = r.workload;
  j["backend"] = r.backend;
  j["dtype"] = r.dtype;
  j["status"] = case_status_name(r.status);
  j["reason"] = r.reason;
  j["reason_code"] = reason_code_name(r.reason_code);
  j["implementation"] = r.implementation;
  j["math_mode"] = r.math_mode;
  if (!r.reference_kernels.empty()) {
    nlohmann::json uses = nlohmann::json::array();
    for (const ReferenceKernelUse& use : r.reference_kernels)
      uses.push_back({{"op", use.op},
                      {"implementation", use.implementation},
                      {"share_of_time", use.share_of_time ? nlohmann::json(*use.share_of_time)
                                                          : nlohmann::json(nullptr)}});
    j["reference_kernels"] = uses;
  }
  if (r.bf16_emulated) j["bf16_emulated"] = true;
  j["validation"] = nullptr;
  if (r.validation) {
    const Validation& v = *r.validation;
    j["validation"] = {{"passed", v.passed},       {"method", v.method},   {"error", v.error},
                       {"tolerance", v.tolerance}, {"checked", v.checked}, {"message", v.message}};
  }
  j["samples_s"] = r.samples_s;
  j["units_per_sample"] = r.units_per_sample;
  j["warmup_runs"] = r.warmup_runs;
  j["stats"] = r.stats ? to_json(*r.stats) : nlohmann::json(nullptr);
  j["metrics"] = nullptr;
  if (r.metrics) {
    nlohmann::json m = nlohmann::json::object();
    auto put = [&m](const char* key, const std::optional<double>& value) {
      if (value) m[key] = *value;
    };
    put("flops", r.metrics->flops);
    put("bytes", r.metrics->bytes);
    put("tflops", r.metrics->tflops);
    put("gbps", r.metrics->gbps);
    put("samples_per_s", r.metrics->samples_per_s);
    put("tokens_per_s", r.metrics->tokens_per_s);
    put("percent_of_peak", r.metrics->percent_of_peak);
    put("percent_of_theoretical_peak", r.metrics->percent_of_theoretical_peak);
    if (r.metrics->above_measured_peak) m["above_measured_peak"] = true;
    put("seconds", r.metrics->seconds);
    put("algbw_gbps", r.metrics->algbw_gbps);
    put("busbw_gbps", r.metrics->busbw_gbps);
    j["metrics"] = m;
  }
  if (r.details.is_object()) j["details"] = r.details;
  if (r.ranks.is_array()) j["ranks"] = r.ranks;
  if (r.memory) j["memory"] = to_json(*r.memory);
  if (r.energy) j["energy"] = to_json(*r.energy);
  nlohmann::json stages = nlohmann::json::object();
  for (const CaseStage stage : kCaseStages)
    if (const std::optional<double>& seconds = r.stage_seconds[static_cast<std::size_t>(stage)])
      stages[case_stage_name(stage)] = *seconds;
  if (!stages.empty()) j["stage_seconds"] = stages;
  if (r.headline)
    j["headline"] = {{"metric", r.headline->metric},
                     {"unit", r.headline->unit},
                     {"figure", r.headline->figure},
                     {"lower_is_better", r.headline->lower_is_better}};
  return j;
}

nlohmann::json to_json(const SampleStats& s) {
  return {{"count", s.count},         {"median_s", s.median},
          {"mean_s", s.mean},         {"min_s", s.min},
          {"max_s", s.max},           {"stddev_s", s.stddev},
          {"ci95_low_s", s.ci95_low}, {"ci95_high_s", s.ci95_high}};
}

nlohmann::json to_json(const DeviceInfo& d) {
  nlohmann::json libraries = nlohmann::json::array();
  for (const Library& library : d.libraries)
    libraries.push_back({{"name", library.name}, {"version", library.version}});
  return {{"kind", d.kind},
          {"model", d.model},
          {"sockets", d.sockets},
          {"cores", d.cores},
          {"logical_cpus", d.logical_cpus},
          {"threads_used", d.threads_used},
          {"affinity", d.affinity},
          {"memory_bytes", d.memory_bytes},
          {"numa_nodes", d.numa_nodes},
          {"isa", d.isa},
          {"libraries", libraries},
          {"clock_ghz", d.clock_ghz},
          {"details", d.details}};
}

ReportFormat parse_report_format(std::string_view name) {
  if (name == "json") return ReportFormat::json;
  if (name == "gbench") return ReportFormat::gbench;
  throw UsageError(fmt::format("unknown report format '{}' (expected json or gbench)", name));
}

const nlohmann::json& report_schema() {
  static const nlohmann::json schema = nlohmann::json::parse(*embedded_file("schema.json"));
  return schema;
}

nlohmann::json read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ReportError(fmt::format("cannot read report {}: {}", path, std::strerror(errno)));
  if (std::filesystem::is_directory(path))
    throw ReportError(fmt::format("cannot read report {}: it is a directory", path));
  nlohmann::json report;
  // Far deeper than any report trainbench writes (under 10 levels): the readers that walk a
  // report (the schema check, serialisation into the history) recurse once per level.
  constexpr int kDeepestReport = 64;
  const auto depth_limit = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kDeepestReport)
      throw ReportError(
          fmt::format("corrupt report {}: nested deeper than {} levels", path, kDeepestReport));
    return true;
  };
  try {
    report = nlohmann::json::parse(in, depth_limit);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, a number out of range
    throw ReportError(fmt::format("corrupt report {}: not valid JSON ({})", path, e.what()));
  }
  if (!report.is_object() || !report.contains("schema_version"))
    throw ReportError(fmt::format("{} is not a trainbench report (no schema_version)", path));
  if (report["schema_version"] != kReportSchemaVersion)
    throw ReportError(
        fmt::format("report {} has schema version {}; this trainbench reads version {} only", path,
                    report["schema_version"].dump(), kReportSchemaVersion));
  const std::vector<std::string> errors = validate_against_schema(report_schema(), report);
  if (!errors.empty())
    throw ReportError(
        fmt::format("corrupt report {}: {}{}", path, errors.front(),
                    errors.size() > 1 ? fmt::format(" (and {} more)", errors.size() - 1) : ""));
  // What the schema cannot say: a passed result was timed, each sample a positive time, and each
  // case (backend, dtype, workload, at its world size) is there once: a reader would take two
  // results of one case for two runs, or keep one.
  std::set<std::tuple<std::string, std::string, std::string, std::string>> cases;
  for (const auto& result : report["results"]) {
    const std::string workload = result["workload"], backend = result.value("backend", "");
    const std::string dtype = result.value("dtype", "");
    const auto details = result.find("details");
    const std::string world =
        details != result.end() && details->is_object() && details->contains("world_size")
            ? (*details)["world_size"].dump()
            : "";
    if (!cases.insert({workload, dtype, backend, world}).second)
      throw ReportError(fmt::format(
          "corrupt report {}: the case '{} [{}] {}' is there twice (a report holds each case once)",
          path, backend, dtype, workload));
    if (parse_case_status(result["status"].get<std::string>()) != CaseStatus::passed) continue;
    if (!result["stats"].is_object() || result["samples_s"].empty())
      throw ReportError(
          fmt::format("corrupt report {}: the passed result '{}' has no samples", path, workload));
    for (const auto& sample : result["samples_s"])
      if (!sample.is_number() || !(sample.get<double>() > 0) ||
          !std::isfinite(sample.get<double>()))
        throw ReportError(fmt::format(
            "corrupt report {}: the passed result '{}' has a sample of {} s (a time must be "
            "positive)",
            path, workload, sample.dump()));
  }
  return report;
}

namespace {

// Google Benchmark's reporter prints the host context itself; we hand it our runs.
class GbenchRuns {
 public:
  explicit GbenchRuns(const nlohmann::json& report) {
    int64_t family = 0;
    for (const ResultRecord& record : read_results(report)) add_case(record, family++);
  }
  const std::vector<benchmark::BenchmarkReporter::Run>& runs() const { return runs_; }

 private:
  using Run = benchmark::BenchmarkReporter::Run;

  // A case that did not pass: Google Benchmark's error run, spelled as its version spells it.
  static void mark_failed(Run* run, std::string message) {
#ifdef TRAINBENCH_BENCHMARK_SKIPPED_RUNS
    run->skipped = benchmark::internal::SkippedWithError;
    run->skip_message = std::move(message);
#else
    run->error_occurred = true;
    run->error_message = std::move(message);
#endif
  }

  void add_case(const ResultRecord& record, int64_t family) {
    const nlohmann::json& result = *record.json;
    Run base;
    base.run_name.function_name = fmt::format("{}/{}", result["backend"].get<std::string>(),
                                              result["workload"].get<std::string>());
    base.family_index = family;
    base.per_family_instance_index = 0;
    base.time_unit = benchmark::kMicrosecond;
    base.threads = 1;
    if (!record.passed()) {
      mark_failed(&base, fmt::format("{}: {}", case_status_name(record.status), record.reason));
      runs_.push_back(base);
      return;
    }
    const auto& samples = result["samples_s"];
    const int64_t units = result["units_per_sample"];
    base.repetitions = static_cast<int64_t>(samples.size());
    const nlohmann::json metrics =
        result["metrics"].is_object() ? result["metrics"] : nlohmann::json::object();
    // Counters are numbers: a flag (above_measured_peak) is 1 or 0, a null metric left out.
    for (const auto& [key, value] : metrics.items()) {
      if (key == "flops" || key == "bytes") continue;
      if (value.is_number()) base.counters[key] = benchmark::Counter(value.get<double>());
      if (value.is_boolean()) base.counters[key] = benchmark::Counter(value.get<bool>() ? 1 : 0);
    }
    for (std::size_t i = 0; i < samples.size(); ++i) {
      Run run = base;
      run.repetition_index = static_cast<int64_t>(i);
      run.iterations = units;
      run.real_accumulated_time = samples[i].get<double>() * static_cast<double>(units);
      run.cpu_accumulated_time = run.real_accumulated_time;  // wall clock only is measured
      runs_.push_back(run);
    }
    const SampleStats& stats = *record.stats;
    for (const auto& [aggregate, seconds] :
         {std::pair{"mean", stats.mean}, {"median", stats.median}, {"stddev", stats.stddev}}) {
      Run run = base;
      run.run_type = Run::RT_Aggregate;
      run.aggregate_name = aggregate;
      run.aggregate_unit = benchmark::StatisticUnit::kTime;
      run.iterations = static_cast<int64_t>(samples.size());
      run.real_accumulated_time = seconds * static_cast<double>(run.iterations);
      run.cpu_accumulated_time = run.real_accumulated_time;
      runs_.push_back(run);
    }
  }

  std::vector<Run> runs_;
};

}  // namespace

std::string to_gbench_json(const nlohmann::json& report) {
  std::ostringstream out, errors;
  benchmark::JSONReporter reporter;
  reporter.SetOutputStream(&out);
  reporter.SetErrorStream(&errors);
  benchmark::BenchmarkReporter::Context::executable_name = "trainbench";
  reporter.ReportContext(benchmark::BenchmarkReporter::Context());
  const GbenchRuns runs(report);
  if (!runs.runs().empty()) reporter.ReportRuns(runs.runs());
  reporter.Finalize();
  return out.str();
}

ReportWriter::ReportWriter(std::string path, ReportFormat format, nlohmann::json header)
    : path_(std::move(path)), format_(format), report_(std::move(header)) {
  if (!report_.contains("results")) report_["results"] = nlohmann::json::array();
  std::string target;
  try {
    target = output_path(path_);
  } catch (const FileError& e) {
    throw ReportError(e.what());
  }
  const fs::path folder =
      fs::path(target).parent_path().empty() ? fs::path(".") : fs::path(target).parent_path();
  if (::access(folder.c_str(), W_OK) != 0)
    throw ReportError(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
  path_existed_ = fs::exists(target);
}

void ReportWriter::add(const CaseResult& result) {
  add(to_json(result));
}

void ReportWriter::add(nlohmann::json result) {
  report_["results"].push_back(std::move(result));
  write();
}

void ReportWriter::set(const std::string& key, nlohmann::json value) {
  report_[key] = std::move(value);
  write();
}

void ReportWriter::finish(const std::string& finished_at) {
  report_["finished_at"] = finished_at;
  write();
}

void ReportWriter::write() {
  const bool finished = !report_.value("finished_at", nlohmann::json()).is_null();
  if (report_["results"].empty() && (!finished || path_existed_)) return;
  const std::string text =
      format_ == ReportFormat::json ? report_.dump(2) + "\n" : to_gbench_json(report_);
  try {
    write_file_atomically(path_, text);
    written_ = true;
    failure_.reset();
    return;
  } catch (const FileError& e) {
    failure_ = ReportWriteFailure{e.what(), std::nullopt};
  }
  const std::string fallback =
      (fs::path(temporary_folder()) / fmt::format("trainbench-unsaved-{}.json", getpid())).string();
  try {
    write_file_atomically(fallback, text);
    failure_->fallback = fallback;
  } catch (const FileError& e) {
    failure_->reason += fmt::format("; nor the fallback: {}", e.what());
  }
}

}  // namespace tb
