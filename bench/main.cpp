// trainbench: measures deep-learning training work on CPUs and GPUs through interchangeable
// backends and writes validated, versioned JSON reports.
#include <iostream>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <CLI/CLI.hpp>

#include "backends/registry.h"
#include "bench/inventory.h"
#include "bench/report_commands.h"
#include "bench/runner.h"
#include "reports/report.h"
#include "workloads/registry.h"

namespace tb {
namespace {

std::string quoted_command_line(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool plain = arg.find_first_of(" \t'\"$\\") == std::string::npos && !arg.empty();
    line += (i ? " " : "") + (plain ? arg : "'" + arg + "'");
  }
  return line;
}

std::string plain(std::string text) {
  std::erase(text, '`');
  return text;
}

int list_command(bool markdown) {
  if (markdown) {
    fmt::print("{}", key_tables_markdown(workload_kinds()));
    return 0;
  }
  fmt::print("workloads (descriptor: NAME key=value ...):\n");
  for (const WorkloadKind& kind : workload_kinds()) {
    fmt::print("  {:<8} {}\n  {:<8}   {} {}\n", kind.name, kind.summary, "", kind.name,
               key_usage(kind));
    for (const KeySpec& spec : kind.keys) {
      const KeyRow row = key_row(spec);
      fmt::print("      {:<14} {}; {}: {}\n", spec.name, plain(row.choices),
                 spec.required ? "required" : "default " + plain(row.fallback), row.meaning);
    }
  }
  fmt::print("\nsuites: {}\nshape lists (shapes=NAME): {}\n", fmt::join(suite_names(), ", "),
             fmt::join(shape_list_names(), ", "));
  fmt::print("\nbackends in this build:\n");
  for (const BackendEntry& entry : backend_registry()) {
    const Availability availability = entry.probe();
    fmt::print("  {:<12} {:<10} {}{}\n", entry.name, availability.usable ? "usable" : "unusable",
               entry.description, availability.usable ? "" : " -- " + availability.reason);
  }
  return 0;
}

int info_command(const BackendConfig& config, bool as_json) {
  nlohmann::json info = {{"tool", tool_json()},
                         {"host", host_inventory_json()},
                         {"backends", nlohmann::json::array()}};
  const RunOptions defaults;
  for (const BackendEntry& entry : backend_registry()) {
    nlohmann::json backend_json = {{"name", entry.name}};
    const Availability availability = entry.probe();
    std::unique_ptr<Backend> backend;
    Status status = availability.usable ? entry.create(config, &backend)
                                        : Status::Unavailable(availability.reason);
    if (status.ok()) {
      backend_json["device"] = to_json(backend->device_info());
      backend_json["peaks"] = peaks_json(measure_peaks(*backend, defaults.peak_harness));
    } else {
      backend_json["unusable"] = status.message();
    }
    info["backends"].push_back(backend_json);
  }
  if (as_json) {
    fmt::print("{}\n", info.dump(2));
    return 0;
  }
  const auto& host = info["host"];
  fmt::print("trainbench {} ({})\n", info["tool"]["version"].get<std::string>(),
             info["tool"]["git_commit"].get<std::string>());
  fmt::print("host      {}\n", host["hostname"].get<std::string>());
  fmt::print("cpu       {} ({} sockets, {} cores, {} logical CPUs, {} NUMA nodes)\n",
             host["cpu_model"].get<std::string>(), host["sockets"].get<int>(),
             host["cores"].get<int>(), host["logical_cpus"].get<int>(),
             host["numa_nodes"].get<int>());
  if (host.contains("cpu_id") && host["cpu_id"].contains("part")) {
    const auto& id = host["cpu_id"];
    fmt::print("cpu id    {} implementer {} part {} variant {} revision {}\n",
               id.value("vendor", std::string("?")), id.value("implementer", std::string("?")),
               id.value("part", std::string("?")), id.value("variant", -1),
               id.value("revision", -1));
  } else if (host.contains("cpu_id") && host["cpu_id"].contains("family") &&
             host["cpu_id"]["family"].is_number_integer()) {
    // (x86 only: another CPU, or an emulated one, has no family / model / stepping)
    const auto& id = host["cpu_id"];
    fmt::print("cpu id    {} family {} model {} stepping {} microcode {}\n",
               id.value("vendor", std::string("?")), id.value("family", -1), id.value("model", -1),
               id.value("stepping", -1), id.value("microcode", std::string("?")));
  }
  if (host.contains("last_level_cache") && host["last_level_cache"].is_object())
    fmt::print("llc       {:.1f} MiB in {} instance(s) over the CPUs used\n",
               host["last_level_cache"].value("bytes", 0.0) / (1 << 20),
               host["last_level_cache"].value("instances", 0));
  if (host.contains("cpu_quota") && !host["cpu_quota"].is_null())
    fmt::print("quota     {}\n", host["cpu_quota"].dump());
  if (host.contains("transparent_hugepages"))
    fmt::print("thp       {}\n", host["transparent_hugepages"].dump());
  fmt::print("memory    {:.1f} GiB\n", host["memory_bytes"].get<double>() / (1 << 30));
  fmt::print("isa       {}\n", fmt::join(host["isa"].get<std::vector<std::string>>(), " "));
  if (host.contains("sve_vector_bits"))
    fmt::print("sve       {}-bit vectors\n", host["sve_vector_bits"].get<int>());
  if (host.contains("emulation") && host["emulation"].is_string())
    fmt::print("EMULATED  {}\n", host["emulation"].get<std::string>());
  fmt::print("os        {} / {}\ncompiler  {}\n", host["os"].get<std::string>(),
             host["kernel"].get<std::string>(), host["compiler"].get<std::string>());
  for (const auto& [name, value] : host["environment"].items())
    fmt::print("env       {}={}\n", name, value.get<std::string>());
  for (const auto& backend : info["backends"]) {
    fmt::print("\nbackend   {}\n", backend["name"].get<std::string>());
    if (backend.contains("unusable")) {
      fmt::print("  unusable: {}\n", backend["unusable"].get<std::string>());
      continue;
    }
    const auto& device = backend["device"];
    fmt::print("  threads {} pinned to CPUs [{}], clock {:.2f} GHz measured\n",
               device["threads_used"].get<int>(),
               fmt::join(device["affinity"].get<std::vector<int>>(), ","),
               device["clock_ghz"].get<double>());
    for (const auto& library : device["libraries"])
      fmt::print("  {} {}\n", library["name"].get<std::string>(),
                 library["version"].get<std::string>());
    for (const auto& [key, value] : device["details"].items())
      fmt::print("  {}: {}\n", key, value.dump());
    for (const auto& [dtype, peak] : backend["peaks"].items()) {
      auto gflops = [](const nlohmann::json& v) {
        return v.is_null() ? std::string("-") : fmt::format("{:.1f}", v.get<double>());
      };
      fmt::print("  peak {:<5} measured {:>8} GFLOP/s, theoretical {:>8} GFLOP/s{}\n", dtype,
                 gflops(peak["measured_gflops"]), gflops(peak["theoretical_gflops"]),
                 peak.contains("reason") ? " (" + peak["reason"].get<std::string>() + ")" : "");
    }
  }
  return 0;
}

int main_impl(int argc, char** argv) {
  CLI::App app{
      "trainbench: deep-learning training benchmarks on CPUs and GPUs, validated, as JSON reports"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");

  CLI::App* list =
      app.add_subcommand("list", "workloads, suites, shape lists, and the backends usable here");
  bool list_markdown = false;
  list->add_flag("--markdown", list_markdown,
                 "print each workload's key table in markdown (as docs/workloads.md has them)");
  CLI::App* info = app.add_subcommand("info", "host inventory, backend devices and measured peaks");
  bool info_json = false;
  info->add_flag("--json", info_json, "print JSON");

  CLI::App* run = app.add_subcommand("run", "run a suite or workloads and write a report");
  std::string suite;
  std::vector<std::string> workloads, backends;
  BackendConfig config;
  std::string pin = "cores", format = "json", out;
  RunOptions options;
  run->add_option("--suite", suite,
                  fmt::format("{} (default quick)", fmt::join(suite_names(), ", ")))
      ->check(CLI::IsMember(suite_names()));
  run->add_option("-w,--workload", workloads,
                  "a workload descriptor, e.g. 'gemm m=4096 dtype=bf16' (repeatable)");
  run->add_option("-b,--backend", backends,
                  "backends to run (comma-separated; default: every usable one)")
      ->delimiter(',');
  for (CLI::App* command : {info, run}) {
    command
        ->add_option("--threads", config.threads,
                     "worker threads (default 0: one per physical core)")
        ->check(CLI::NonNegativeNumber);
    command->add_option("--pin", pin, "thread pinning: cores (one CPU per thread) or none")
        ->check(CLI::IsMember({"cores", "none"}));
  }
  run->add_option("--warmup", options.harness.warmup_runs, "untimed warm-up runs, at least")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--warmup-time", options.harness.warmup_seconds, "warm-up seconds, at least")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--min-reps", options.harness.min_repetitions, "samples per case, at least")
      ->check(CLI::PositiveNumber);
  run->add_option("--max-reps", options.harness.max_repetitions, "samples per case, at most")
      ->check(CLI::PositiveNumber);
  run->add_option("--time-budget", options.harness.time_budget_seconds,
                  "seconds of sampling per case")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--min-sample-time", options.harness.min_sample_seconds,
                  "short units are repeated so one sample lasts at least this long (seconds)")
      ->check(CLI::NonNegativeNumber);
  run->add_flag(
      "--flush-caches", options.harness.flush_caches,
      "evict the caches before every sample (each sample then times one unit from cold caches)");
  run->add_option("--seed", options.seed,
                  "seed of the random inputs: each case's seed mixes it with a hash of the "
                  "case's descriptor line, so a descriptor gets the same inputs in any suite");
  run->add_flag("--allow-reference-kernels", options.allow_reference_kernels,
                "time cases whose plans run reference kernels (flagged in the table and the "
                "report); without it such a case is unimplemented, named, and not timed");
  int training_runs = 0;
  run->add_option("--runs", training_runs,
                  "time-to-train workloads (ttt-*): runs with seeds s, s + 1, ..., where s is "
                  "the case's seed (--seed mixed with a hash of its descriptor line), reported "
                  "as MLPerf's aggregate (a missed target counts as infinitely slow; a case's "
                  "own runs= wins)")
      ->check(CLI::PositiveNumber);
  run->add_option("-o,--out", out, "report file (default trainbench-report-<UTC time>.json)");
  std::vector<std::string> child_environments;
  run->add_option(
      "--child-env", child_environments,
      "also run BACKEND in a child process with a changed environment and merge its results: "
      "BACKEND:NAME=VALUE,-NAME,... ('-NAME' unsets; repeatable), e.g. "
      "'cpu-openblas:-OPENBLAS_CORETYPE,-OPENBLAS_L2_SIZE'");
  run->add_option("--format", format,
                  "report format: json (trainbench schema) or gbench (Google Benchmark)")
      ->check(CLI::IsMember({"json", "gbench"}));

  CompareOptions compare_options;
  std::string compare_format = "table", check_format = "table", ab_format = "table",
              summary_format = "table";
  std::string compare_threshold = "5%", check_threshold = "5%", ab_threshold = "5%";
  CLI::App* compare = app.add_subcommand(
      "compare", "compare reports case by case: speed-up, 95% interval, significance");
  compare
      ->add_option("reports", compare_options.reports, "report files (the first is the reference)")
      ->required();
  compare->add_flag("--across-backends", compare_options.across_backends,
                    "put the backends of each report side by side (CPU against GPU)");
  compare->add_option("--threshold", compare_threshold,
                      "smallest change called faster / slower (default 5%)");
  compare
      ->add_option("--price-per-hour", compare_options.price_per_hour,
                   "USD per hour of each machine, in report order")
      ->delimiter(',');
  compare
      ->add_option("--watts", compare_options.watts,
                   "power of each machine in watts, in report order")
      ->delimiter(',');
  compare->add_option("--costs", compare_options.costs_file,
                      "JSON file {\"REPORT\": {\"price_per_hour\": USD, \"watts\": W}}");
  compare->add_option("--format", compare_format, "table, markdown, csv or json")
      ->check(CLI::IsMember({"table", "markdown", "csv", "json"}));

  CheckOptions check_options;
  CLI::App* check = app.add_subcommand(
      "check",
      "CI gate on run-to-run variation: exit 1 when a case got slower beyond the threshold and "
      "the noise between runs, failed, or was lost");
  check
      ->add_option("--baseline", check_options.baselines,
                   "baseline reports, one per run (each run's median is one observation; "
                   "3 or more test significance, one applies the threshold only)")
      ->expected(1, -1);
  check->add_option("--baseline-history", check_options.history,
                    "take the baseline runs from this history database (trainbench history): "
                    "the newest reports of this machine measured under the same conditions");
  check
      ->add_option("--history-runs", check_options.history_runs,
                   "baseline runs taken from --baseline-history (default 5)")
      ->check(CLI::PositiveNumber);
  check
      ->add_option("--current", check_options.currents,
                   "reports of the build to check, one per run (3 or more for significance)")
      ->required()
      ->expected(1, -1);
  check->add_option("--threshold", check_threshold, "slow-down that fails the check (default 5%)");
  check->add_flag("--force", check_options.force,
                  "accept baselines from another machine or measured under other conditions");
  std::string check_statistic = "median", ab_statistic = "median";
  check
      ->add_option("--run-statistic", check_statistic,
                   "what one run contributes: its median sample (default) or min, its fastest "
                   "(steadier on a loaded machine)")
      ->check(CLI::IsMember({"median", "min"}));
  check->add_flag("--allow-lost", check_options.allow_lost,
                  "list cases measured in the baseline and skipped, unimplemented or absent now "
                  "without failing");
  check->add_option("--format", check_format, "table, markdown or json")
      ->check(CLI::IsMember({"table", "markdown", "json"}));

  AbOptions ab_options;
  CLI::App* ab = app.add_subcommand(
      "ab",
      "run two builds alternating ABBA (A B, B A, A B, ...) on this machine and apply check's "
      "verdict to the runs; further options go to both builds' `run`");
  ab->add_option("--baseline-bin", ab_options.baseline_bin, "the old trainbench binary")
      ->required();
  ab->add_option("--current-bin", ab_options.current_bin, "the new trainbench binary")->required();
  ab->add_option("--rounds", ab_options.rounds,
                 "rounds, each one run of each build (default 5, at least 3)");
  ab->add_flag("--allow-lost", ab_options.allow_lost, "lost cases do not fail (see check)");
  ab->add_option("--run-statistic", ab_statistic, "median (default) or min (see check)")
      ->check(CLI::IsMember({"median", "min"}));
  ab->add_option("--threshold", ab_threshold, "slow-down that fails (default 5%)");
  ab->add_option("--out-dir", ab_options.out_dir,
                 "keep every round's report and the combined ones here");
  ab->add_option("--ab-format", ab_format, "table, markdown or json")
      ->check(CLI::IsMember({"table", "markdown", "json"}));
  ab->allow_extras();

  SummaryOptions summary_options;
  CLI::App* summary = app.add_subcommand("summary", "what a buyer asks, answered from one report");
  summary->add_option("report", summary_options.report, "report file")->required();
  summary->add_option("--format", summary_format, "table, markdown or json")
      ->check(CLI::IsMember({"table", "markdown", "json"}));

  HistoryOptions history_options;
  std::string history_format = "table", history_threshold = "5%";
  CLI::App* history = app.add_subcommand("history", "reports over time in a SQLite file");
  history->add_option("--db", history_options.database, "history database file")
      ->capture_default_str();
  history->add_option("--format", history_format, "table, markdown, csv or json")
      ->check(CLI::IsMember({"table", "markdown", "csv", "json"}));
  history->require_subcommand(1);
  CLI::App* history_add =
      history->add_subcommand("add", "add reports (a report already there is skipped)");
  history_add->add_option("reports", history_options.reports, "report files")->required();
  CLI::App* history_list = history->add_subcommand("list", "the reports in the history");
  CLI::App* history_trend = history->add_subcommand(
      "trend", "each matching case over commits and dates on one machine, change points marked");
  history_trend
      ->add_option("--workload", history_options.workload,
                   "descriptor text to match, e.g. 'gemm m=4096'")
      ->required();
  history_trend->add_option("--machine", history_options.fingerprint,
                            "machine fingerprint (default: the newest report's)");
  history_trend->add_option("--threshold", history_threshold,
                            "smallest change marked (default 5%)");

  HtmlOptions html_options;
  CLI::App* report = app.add_subcommand("report", "render reports as one self-contained HTML page");
  report->add_option("--html", html_options.out, "the HTML file to write")->required();
  report->add_option("reports", html_options.reports, "report files")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());  // every parse error: one line, exit 2
  }
  config.pin = parse_pin_policy(pin);

  if (*list) return list_command(list_markdown);
  if (*info) return info_command(config, info_json);
  if (*compare) {
    compare_options.threshold = parse_threshold(compare_threshold);
    compare_options.format = parse_table_format(compare_format);
    return compare_command(compare_options);
  }
  if (*check) {
    check_options.threshold = parse_threshold(check_threshold);
    check_options.format = parse_table_format(check_format);
    check_options.statistic = check_statistic == "min" ? RunStatistic::min : RunStatistic::median;
    return check_command(check_options);
  }
  if (*ab) {
    ab_options.threshold = parse_threshold(ab_threshold);
    ab_options.format = parse_table_format(ab_format);
    ab_options.statistic = ab_statistic == "min" ? RunStatistic::min : RunStatistic::median;
    ab_options.run_arguments = ab->remaining();
    return ab_command(ab_options);
  }
  if (*history) {
    history_options.format = parse_table_format(history_format);
    history_options.threshold = parse_threshold(history_threshold);
    if (*history_add) return history_add_command(history_options);
    if (*history_list) return history_list_command(history_options);
    if (*history_trend) return history_trend_command(history_options);
  }
  if (*report) return html_report_command(html_options);
  if (*summary) {
    summary_options.format = parse_table_format(summary_format);
    return summary_command(summary_options);
  }

  if (options.harness.max_repetitions < options.harness.min_repetitions)
    throw UsageError("--max-reps must be at least --min-reps");
  if (!suite.empty() || workloads.empty()) {
    options.suite = suite.empty() ? "quick" : suite;
    options.cases = load_suite(*options.suite);
  }
  for (const std::string& line : workloads)
    for (Descriptor& descriptor : expand_shapes(Descriptor::parse(line)))
      options.cases.push_back(std::move(descriptor));
  if (training_runs > 0)
    for (Descriptor& descriptor : options.cases)
      if (const WorkloadKind* kind = find_workload_kind(descriptor.kind());
          kind && kind->find("runs") && !descriptor.has("runs"))
        descriptor.set("runs", std::to_string(training_runs));
  if (backends.empty())
    for (const BackendEntry& entry : backend_registry())
      if (entry.probe().usable) backends.push_back(entry.name);
  if (backends.empty()) throw UsageError("no backend in this build is usable here");
  options.backends = backends;
  for (const std::string& spec : child_environments)
    options.child_environments.push_back(ChildEnvironment::parse(spec));
  options.backend_config = config;
  options.format = parse_report_format(format);
  std::string stamp = utc_now();
  std::erase_if(stamp, [](char c) { return c == ':' || c == '-'; });
  options.out_path = out.empty() ? fmt::format("trainbench-report-{}.json", stamp) : out;
  options.command_line = quoted_command_line(argc, argv);
  return run_benchmarks(options, std::cout, std::cerr);
}

}  // namespace
}  // namespace tb

int main(int argc, char** argv) {
  try {
    return tb::main_impl(argc, argv);
  } catch (const tb::UsageError& e) {
    fmt::print(stderr, "trainbench: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "trainbench: error: {}\n", e.what());
    return 1;
  }
}
