// Reports: one versioned JSON document per run (schema in reports/schema.json), rewritten
// atomically after every case so that killing the run at any moment leaves a valid report
// holding every finished case. The Google Benchmark format is written by its own JSONReporter.
#pragma once

#include <array>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/files.h"
#include "backends/status.h"
#include "reports/case_resources.h"
#include "reports/stats.h"
#include "workloads/workload.h"

namespace tb {

inline constexpr int kReportSchemaVersion = 1;

enum class CaseStatus { passed, failed, skipped, unimplemented };
std::string_view case_status_name(CaseStatus status);

// Metrics from the median sample; each is present only where it applies.
struct CaseMetrics {
  std::optional<double> flops, bytes, tflops, gbps, samples_per_s, tokens_per_s, percent_of_peak,
      percent_of_theoretical_peak;
  // Faster than the dtype's measured peak: the probe fell short of the instruction's throughput
  // here, or the case's FLOP count is wrong. Never shown as a bare percentage over 100.
  bool above_measured_peak = false;
  // Collectives (nccl-tests' definitions): the median of the slowest rank's time per collective,
  // algorithm and bus bandwidth in GB/s (1e9 bytes).
  std::optional<double> seconds, algbw_gbps, busbw_gbps;
};

// The stages of a case, in the order they run, and the wall seconds each took (bench/runner).
enum class CaseStage { setup, validation, breakdown, warmup, timing };
inline constexpr CaseStage kCaseStages[] = {CaseStage::setup, CaseStage::validation,
                                            CaseStage::breakdown, CaseStage::warmup,
                                            CaseStage::timing};
std::string_view case_stage_name(CaseStage stage);  // "setup", ... (the report's keys)
// How long each stage the case reached took (absent: not reached).
using StageSeconds = std::array<std::optional<double>, std::size(kCaseStages)>;

struct CaseResult {
  std::string workload;  // canonical descriptor
  std::string backend;
  std::string dtype;
  CaseStatus status = CaseStatus::failed;
  ReasonCode reason_code = ReasonCode::error;  // none once passed
  std::string reason;
  std::string implementation, math_mode;
  std::vector<ReferenceKernelUse> reference_kernels;  // never reported silently
  bool bf16_emulated = false;
  std::optional<Validation> validation;
  std::vector<double> samples_s;
  int units_per_sample = 0, warmup_runs = 0;
  std::optional<SampleStats> stats;
  std::optional<CaseMetrics> metrics;
  nlohmann::json details = nullptr;  // model workloads: parameters, memory, breakdown
  std::optional<Headline> headline;  // the workload's; absent where no workload was made
  std::optional<CaseMemory> memory;  // measured cases: computed against measured
  std::optional<CaseEnergy> energy;  // measured cases whose backend reads energy counters
  StageSeconds stage_seconds;
  // Run across ranks: each rank's status, reason and median (bench/ranks.h); null for one rank.
  nlohmann::json ranks = nullptr;

  // Ends the case without a speed: its status, code and reason.
  void end(CaseStatus new_status, ReasonCode code, std::string why) {
    status = new_status;
    reason_code = code;
    reason = std::move(why);
  }
};

nlohmann::json to_json(const CaseResult& result);
nlohmann::json to_json(const SampleStats& stats);
nlohmann::json to_json(const DeviceInfo& device);

// A report that cannot be read, parsed, checked against the schema or written: a kind of
// FileError, so one catch covers a report and the file it lives in.
class ReportError : public FileError {
 public:
  using FileError::FileError;
};

enum class ReportFormat { json, gbench };
ReportFormat parse_report_format(std::string_view name);  // throws UsageError

// The report schema compiled into the binary.
const nlohmann::json& report_schema();
// Reads and checks a report: unreadable, not JSON, or not matching the schema -> ReportError.
nlohmann::json read_report(const std::string& path);

// The report's passed cases as Google Benchmark JSON (one run per sample plus mean, median
// and stddev aggregates), written by benchmark::JSONReporter; failed cases as errored runs.
std::string to_gbench_json(const nlohmann::json& report);

// A write of the report that missed its path (a full disk, a file made read-only meanwhile):
// why, and the fallback file in the temporary folder that holds the report instead (none where
// that write failed too).
struct ReportWriteFailure {
  std::string reason;
  std::optional<std::string> fallback;
};

// Keeps the report on disk as a run goes, rewritten after every finished case so that a later
// failure loses none. Nothing is written before a case finishes: an existing file is replaced
// only by a report holding one, and a run that finishes none writes its empty report only where
// no file was. A write that misses the path goes to a fallback file (failure() names it) and
// every later write tries the path again. A header with results (a run going on after a crashed
// process's cases) keeps them.
class ReportWriter {
 public:
  // Throws ReportError where nothing may be written at `path` (output_path's refusals, a folder
  // without write permission), before anything runs.
  ReportWriter(std::string path, ReportFormat format, nlohmann::json header);
  void add(const CaseResult& result);
  void add(nlohmann::json result);  // a result already in report form (from a child run)
  // Sets a top-level key (the backends block, once their peaks are measured).
  void set(const std::string& key, nlohmann::json value);
  void finish(const std::string& finished_at);
  const nlohmann::json& report() const { return report_; }
  const std::string& path() const { return path_; }
  // Why the last write missed the path; nullopt where it reached it, or nothing was written.
  const std::optional<ReportWriteFailure>& failure() const { return failure_; }
  // Whether the path holds this run's report (false until a case finished, and for a run that
  // finished none where a file already was: that file is left as it was).
  bool written() const { return written_; }

 private:
  void write();
  std::string path_;
  ReportFormat format_;
  nlohmann::json report_;
  bool path_existed_ = false;  // a file was at the path as the run began
  bool written_ = false;
  std::optional<ReportWriteFailure> failure_;
};

}  // namespace tb
