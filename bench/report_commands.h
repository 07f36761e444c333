// The subcommands that read reports: compare, check, ab, summary.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/compare.h"
#include "reports/summary.h"
#include "reports/text_table.h"

namespace tb {

TableFormat parse_table_format(const std::string& name);  // throws UsageError
// "5%" or "0.05" -> 0.05; throws UsageError.
double parse_threshold(const std::string& text);

// A report named on the command line: unreadable, corrupt or foreign -> UsageError (exit 2).
nlohmann::json read_input_report(const std::string& path);

// Each machine's price and power (compare, summary): one value per report, in report order, or
// from a costs file keyed by report path or file name; empty lists where not given.
struct CostOptions {
  std::vector<double> price_per_hour, watts;
  std::optional<std::string> costs_file;  // {"REPORT": {"price_per_hour": X, "watts": Y}}
};
// Per report, its price and power: a list of the wrong length or a bad costs file ->
// UsageError.
std::vector<Costs> load_costs(const std::vector<std::string>& reports, const CostOptions& options);

struct CompareOptions {
  std::vector<std::string> reports;
  bool across_backends = false;
  double threshold = 0.05;
  TableFormat format = TableFormat::table;
  CostOptions costs;
};
int compare_command(const CompareOptions& options);

struct CheckOptions {
  std::vector<std::string> baselines, currents;  // one report per run
  std::optional<std::string> history;            // baselines from this history database
  int history_runs = 5;                          // the newest this many matching reports
  double threshold = 0.05;
  bool force = false;       // accept baselines measured under other conditions
  bool allow_lost = false;  // cases measured before and not now do not fail the check
  RunStatistic statistic = RunStatistic::median;
  TableFormat format = TableFormat::table;
};
int check_command(const CheckOptions& options);

struct AbOptions {
  std::string baseline_bin, current_bin;
  int rounds = 5;  // each one run of each build, in ABBA order
  double threshold = 0.05;
  bool allow_lost = false;
  RunStatistic statistic = RunStatistic::median;
  TableFormat format = TableFormat::table;
  std::optional<std::string> out_dir;      // keeps every round's report and the two combined ones
  std::vector<std::string> run_arguments;  // passed to `run` of both builds
};
int ab_command(const AbOptions& options);

// `trainbench plan`: a model (a model workload's descriptor, or its counts given) on a device
// (a memory size, or a report's device).
struct PlanOptions {
  std::optional<std::string> workload;  // "bert-train model=large batch=4 seq=128"
  std::optional<double> parameters, activation_bytes_per_sample,
      recomputed_activation_bytes_per_sample;
  std::string dtype = "bf16", optimizer = "adamw";
  std::int64_t batch = 1;   // per device (micro-batch)
  std::int64_t layers = 0;  // given models: ZeRO-3 gathers one of this many layers at a time
  std::optional<double> memory_gib;
  std::optional<std::string> report;  // the device, measured activations, collective sweeps
  int devices = 0;                    // at hand (0: not said)
  double reserve_gib = 1.0;           // kept back for the runtime and libraries
  std::optional<std::string> check;   // a report whose model cases' peaks are checked
  TableFormat format = TableFormat::table;
};
int plan_command(const PlanOptions& options);

struct SummaryOptions {
  std::vector<std::string> reports;  // any number; those of one host are one machine
  CostOptions costs;
  TableFormat format = TableFormat::table;
};
int summary_command(const SummaryOptions& options);

struct HistoryOptions {
  std::string database = "trainbench-history.db";
  std::vector<std::string> reports;        // add
  std::string workload;                    // trend: descriptor substring
  std::optional<std::string> fingerprint;  // trend: machine (default: newest report's)
  double threshold = 0.05;                 // trend: change points
  TableFormat format = TableFormat::table;
};
int history_add_command(const HistoryOptions& options);
int history_list_command(const HistoryOptions& options);
int history_trend_command(const HistoryOptions& options);

struct HtmlOptions {
  std::string out;
  std::vector<std::string> reports;
  std::optional<std::string> history;  // a history database: each case of its newest machine
};
int html_report_command(const HtmlOptions& options);

}  // namespace tb
