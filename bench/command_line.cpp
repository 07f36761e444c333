#include "bench/command_line.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <CLI/CLI.hpp>

#include "backends/files.h"
#include "backends/numbers.h"
#include "backends/registry.h"
#include "bench/case_isolation.h"
#include "bench/inventory.h"
#include "bench/report_commands.h"
#include "bench/runner.h"
#include "dist/world.h"
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

// The tool, the host inventory and, per backend, its device and measured peaks (or why it is
// unusable): what `info --json` prints.
nlohmann::json info_json(const BackendConfig& config) {
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
  return info;
}

// "llc 32.0 MiB in 1 instance(s) over the CPUs used (sysfs)"; where nothing gave a size, what
// sizing assumed instead.
void print_last_level_cache(const nlohmann::json& llc) {
  const std::string source = llc.contains("source") && llc["source"].is_string()
                                 ? llc["source"].get<std::string>()
                                 : "sysfs";  // reports before the source was recorded
  if (!llc.contains("bytes") || !llc["bytes"].is_number()) {
    fmt::print(
        "llc       unknown (no /sys cache directory, no CPUID cache leaf); sized as {:.1f} MiB\n",
        llc.value("sized_as", 0.0) / (1 << 20));
    return;
  }
  fmt::print("llc       {:.1f} MiB in {} instance(s) over the CPUs used ({})\n",
             llc["bytes"].get<double>() / (1 << 20), llc.value("instances", 0), source);
}

void print_host(const nlohmann::json& info) {
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
    print_last_level_cache(host["last_level_cache"]);
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
}

void print_backend(const nlohmann::json& backend) {
  fmt::print("\nbackend   {}\n", backend["name"].get<std::string>());
  if (backend.contains("unusable")) {
    fmt::print("  unusable: {}\n", backend["unusable"].get<std::string>());
    return;
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
    fmt::print("  peak {:<5} measured {:>8} GFLOP/s, theoretical {:>8} GFLOP/s{}{}\n", dtype,
               gflops(peak["measured_gflops"]), gflops(peak["theoretical_gflops"]),
               peak.contains("probe_gflops")
                   ? fmt::format(", probe {:.1f} GFLOP/s", peak["probe_gflops"].get<double>())
                   : "",
               peak.contains("reason") ? " (" + peak["reason"].get<std::string>() + ")" : "");
  }
}

int info_command(const BackendConfig& config, bool as_json) {
  const nlohmann::json info = info_json(config);
  if (as_json) {
    fmt::print("{}\n", info.dump(2));
    return 0;
  }
  print_host(info);
  for (const auto& backend : info["backends"]) print_backend(backend);
  return 0;
}

// Each subcommand registers its options and returns what runs it once the command line is
// parsed; its option values live in that closure.
struct Subcommand {
  CLI::App* app;
  std::function<int()> run;
  // Reads reports (and history databases): content the schema admits but the command cannot
  // read (a details entry of another shape) is bad input, exit 2, never a crash.
  bool reads_reports = false;
  // CommandLineMode::check_only: checks what run() would check before it starts (none: the
  // parse alone).
  std::function<void()> check = nullptr;
};

// A finite number in `range`, read by the one number parser (backends/numbers.h). CLI11's
// NonNegativeNumber lets "nan" through (no comparison holds for it), and a NaN time budget would
// be written as null, a report trainbench's readers reject.
CLI::Validator number_in(NumberRange range) {
  return CLI::Validator(
      [range](std::string& text) -> std::string {
        if (!parse_number(text, range))
          return fmt::format("expected a finite number {}, got '{}'", range.words(), text);
        return "";
      },
      "NUMBER " + range.words());
}

// A whole number in [min, max]: CLI11 alone turns an out-of-range --seed into 2^64 - 1.
CLI::Validator whole_number_in(std::int64_t min, std::int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        if (!parse_whole_number(text, min, max))
          return fmt::format("expected a whole number from {} to {}, got '{}'", min, max, text);
        return "";
      },
      fmt::format("INT in [{}, {}]", min, max));
}

constexpr NumberRange kNonNegative{.min = 0};
constexpr NumberRange kPositive{.min = 0, .min_excluded = true};
// Counts of runs and samples: beyond any run that could finish, small enough not to wrap.
constexpr std::int64_t kMostRuns = 1'000'000;

constexpr const char* kDefaultThreshold = "5%";
constexpr const char* kDefaultTableFormat = "table";

void add_threshold(CLI::App* command, std::string& threshold, const char* what) {
  threshold = kDefaultThreshold;
  command->add_option("--threshold", threshold, fmt::format("{} (default {})", what, threshold));
}

// --format (or `flag`) taking one of `choices`, the first the default: "table, markdown or json".
void add_format(CLI::App* command, std::string& format, const std::vector<std::string>& choices,
                const char* flag = "--format") {
  format = choices.front();
  const std::vector<std::string> all_but_last(choices.begin(), choices.end() - 1);
  command
      ->add_option(flag, format,
                   fmt::format("{} or {}", fmt::join(all_but_last, ", "), choices.back()))
      ->check(CLI::IsMember(choices));
}

const std::vector<std::string> kTableFormats = {kDefaultTableFormat, "markdown", "json"};
const std::vector<std::string> kTableFormatsWithCsv = {kDefaultTableFormat, "markdown", "csv",
                                                       "json"};

RunStatistic parse_run_statistic(const std::string& name) {
  return name == "min" ? RunStatistic::min : RunStatistic::median;
}

// --threads and --pin, for the commands that start backends (info, run).
void add_backend_options(CLI::App* command, BackendConfig& config, std::string& pin) {
  command
      ->add_option("--threads", config.threads, "worker threads (default 0: one per physical core)")
      ->check(whole_number_in(0, std::numeric_limits<int>::max()));
  pin = "cores";
  command->add_option("--pin", pin, "thread pinning: cores (one CPU per thread) or none")
      ->check(CLI::IsMember({"cores", "none"}));
}

Subcommand register_list(CLI::App& app) {
  CLI::App* list =
      app.add_subcommand("list", "workloads, suites, shape lists, and the backends usable here");
  auto markdown = std::make_shared<bool>(false);
  list->add_flag("--markdown", *markdown,
                 "print each workload's key table in markdown (as docs/workloads.md has them)");
  return {list, [markdown] { return list_command(*markdown); }};
}

Subcommand register_info(CLI::App& app) {
  CLI::App* info = app.add_subcommand("info", "host inventory, backend devices and measured peaks");
  struct State {
    bool json = false;
    BackendConfig config;
    std::string pin;
  };
  auto s = std::make_shared<State>();
  info->add_flag("--json", s->json, "print JSON");
  add_backend_options(info, s->config, s->pin);
  return {info, [s] {
            s->config.pin = parse_pin_policy(s->pin);
            return info_command(s->config, s->json);
          }};
}

// The run subcommand's option values, as its command line sets them.
struct RunState {
  std::string suite;
  std::vector<std::string> workloads, backends;
  BackendConfig config;
  std::string pin, format = "json", out;
  RunOptions options;
  int training_runs = 0;
  std::vector<std::string> child_environments;
  bool in_process = false;
};

// TRAINBENCH_TEST_RANK_DELAY=RANK:SECONDS, set only by tests: rank RANK sleeps SECONDS before
// each phase of the harness starts its clock, so that the ranks' clocks disagree as on a
// loaded host (HarnessConfig::phase_delay_seconds). 0 on every other rank.
double test_phase_delay(const World& world) {
  const char* text = std::getenv("TRAINBENCH_TEST_RANK_DELAY");
  if (!text) return 0;
  const std::string_view value = text;
  const std::size_t colon = value.find(':');
  const auto rank = parse_whole_number(value.substr(0, colon), 0, std::numeric_limits<int>::max());
  const auto seconds = colon == std::string_view::npos
                           ? std::nullopt
                           : parse_number(value.substr(colon + 1), {.min = 0, .max = 60});
  if (!rank || !seconds)
    throw UsageError(fmt::format(
        "TRAINBENCH_TEST_RANK_DELAY='{}': expected RANK:SECONDS, seconds in [0, 60]", text));
  return *rank == world.rank() ? *seconds : 0;
}

// A path a command will write, checked before anything runs: bad input (a device, a
// directory, a read-only file) is a usage error, and no measured result waits on it.
const std::string& checked_output(const std::string& path) {
  try {
    output_path(path);
  } catch (const FileError& e) {
    throw UsageError(e.what());
  }
  return path;
}

// The same case twice (a workload given twice, its keys in any order, or a backend named twice)
// would run twice and be read as two runs of one case: bad input, each repeat named.
void refuse_duplicate_cases(const std::vector<Descriptor>& cases,
                            const std::vector<std::string>& backends) {
  std::set<std::string> seen;
  std::vector<std::string> repeated;
  for (const Descriptor& descriptor : cases) {
    auto params = descriptor.params();
    std::sort(params.begin(), params.end());
    std::string key = descriptor.kind();
    for (const auto& [name, value] : params) key += " " + name + "=" + value;
    if (!seen.insert(key).second) repeated.push_back("workload '" + descriptor.to_string() + "'");
  }
  seen.clear();
  for (const std::string& backend : backends)
    if (!seen.insert(backend).second) repeated.push_back("backend '" + backend + "'");
  if (!repeated.empty())
    throw UsageError(
        fmt::format("{} given more than once: each case runs once per run (use "
                    "--min-reps or --runs for more samples)",
                    fmt::join(repeated, ", ")));
}

// Turns the run subcommand's options into the runner's (suite or workloads, backends, report
// path), every one checked.
RunOptions run_options(RunState& s, const std::string& command_line, World& world) {
  auto& [suite, workloads, backends, config, pin, format, out, options, training_runs,
         child_environments, in_process] = s;
  config.pin = parse_pin_policy(pin);
  if (options.harness.max_repetitions < options.harness.min_repetitions)
    throw UsageError("--max-reps must be at least --min-reps");
  if (!suite.empty() && !workloads.empty())
    throw UsageError(
        "give --suite or -w (--workload), not both: -w names the cases instead of a suite");
  if (workloads.empty()) {
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
  refuse_duplicate_cases(options.cases, backends);
  options.backends = backends;
  for (const std::string& spec : child_environments)
    options.child_environments.push_back(ChildEnvironment::parse(spec));
  options.backend_config = config;
  options.format = parse_report_format(format);
  std::string stamp = utc_now();
  std::erase_if(stamp, [](char c) { return c == ':' || c == '-'; });
  options.out_path = out.empty() ? fmt::format("trainbench-report-{}.json", stamp) : out;
  if (world.rank() == 0) checked_output(options.out_path);  // rank 0 writes the report
  try {
    writable_temporary_folder();  // the case journal's folder goes there
  } catch (const FileError& e) {
    throw UsageError(e.what());
  }
  options.command_line = command_line;
  options.harness.phase_delay_seconds = test_phase_delay(world);
  return options;
}

Subcommand register_run(CLI::App& app, int argc, char** argv, World& world) {
  CLI::App* run = app.add_subcommand("run", "run a suite or workloads and write a report");
  auto s = std::make_shared<RunState>();
  auto& [suite, workloads, backends, config, pin, format, out, options, training_runs,
         child_environments, in_process] = *s;
  run->add_option("--suite", suite,
                  fmt::format("{} (default quick)", fmt::join(suite_names(), ", ")))
      ->check(CLI::IsMember(suite_names()));
  run->add_option("-w,--workload", workloads,
                  "a workload descriptor, e.g. 'gemm m=4096 dtype=bf16' (repeatable)");
  run->add_option("-b,--backend", backends,
                  "backends to run (comma-separated; default: every usable one)")
      ->delimiter(',');
  add_backend_options(run, config, pin);
  run->add_option("--warmup", options.harness.warmup_runs, "untimed warm-up runs, at least")
      ->check(whole_number_in(0, kMostRuns));
  run->add_option("--warmup-time", options.harness.warmup_seconds,
                  "warm-up seconds, at least, up to --time-budget")
      ->check(number_in(kNonNegative));
  run->add_option("--min-reps", options.harness.min_repetitions, "samples per case, at least")
      ->check(whole_number_in(1, kMostRuns));
  run->add_option("--max-reps", options.harness.max_repetitions, "samples per case, at most")
      ->check(whole_number_in(1, kMostRuns));
  run->add_option("--time-budget", options.harness.time_budget_seconds,
                  "seconds of sampling per case")
      ->check(number_in(kNonNegative));
  run->add_option("--min-sample-time", options.harness.min_sample_seconds,
                  "short units are repeated so one sample lasts at least this long (seconds)")
      ->check(number_in(kNonNegative));
  run->add_flag(
      "--flush-caches", options.harness.flush_caches,
      "evict the caches before every sample (each sample then times one unit from cold caches)");
  run->add_option("--seed", options.seed,
                  "seed of the random inputs: each case's seed mixes it with a hash of the "
                  "case's descriptor line, so a descriptor gets the same inputs in any suite")
      ->check(whole_number_in(0, std::numeric_limits<std::int64_t>::max()));
  run->add_flag("--allow-reference-kernels", options.allow_reference_kernels,
                "time cases whose plans run reference kernels (flagged in the table and the "
                "report); without it such a case is unimplemented, named, and not timed");
  run->add_option("--runs", training_runs,
                  "time-to-train workloads (ttt-*): runs with seeds s, s + 1, ..., where s is "
                  "the case's seed (--seed mixed with a hash of its descriptor line), reported "
                  "as MLPerf's aggregate (a missed target counts as infinitely slow; a case's "
                  "own runs= wins)")
      ->check(whole_number_in(1, 1000));
  run->add_flag("-v,--verbose", options.verbose,
                "under each case's row, the seconds of its stages: setup, validation, breakdown, "
                "warmup and timing");
  run->add_option("-o,--out", out, "report file (default trainbench-report-<UTC time>.json)");
  run->add_option(
      "--child-env", child_environments,
      "also run BACKEND in a child process with a changed environment and merge its results: "
      "BACKEND:NAME=VALUE,-NAME,... ('-NAME' unsets; repeatable), e.g. "
      "'cpu-openblas:-OPENBLAS_CORETYPE,-OPENBLAS_L2_SIZE'");
  run->add_flag("--in-process", in_process,
                "run the cases in this process: a library that crashes then ends the run (for "
                "a debugger); by default a case that dies of a fatal signal is recorded as "
                "failed and the run goes on in a new process");
  run->add_option("--format", format,
                  "report format: json (trainbench schema) or gbench (Google Benchmark)")
      ->check(CLI::IsMember({"json", "gbench"}));

  const std::string command_line = quoted_command_line(argc, argv);
  return {run,
          [s, command_line, &world, argv] {
            const RunOptions options = run_options(*s, command_line, world);
            // One process runs the cases and another restarts it past a case that crashed;
            // not under a launcher, which starts each rank itself.
            // Every child writes the one report this process named (a default name holds
            // the time, which each child would take anew).
            if (!world.launched() && !s->in_process && !CaseJournal::from_environment())
              return supervise_run(argv,
                                   s->out.empty() ? std::vector<std::string>{"-o", options.out_path}
                                                  : std::vector<std::string>{},
                                   options.out_path, std::cerr);
            return run_benchmarks(options, world, std::cout, std::cerr);
          },
          false, [s, command_line, &world] { run_options(*s, command_line, world); }};
}
// --price-per-hour, --watts and --costs: each machine's price and power, in report order.
void add_cost_options(CLI::App* command, CostOptions& costs) {
  command
      ->add_option("--price-per-hour", costs.price_per_hour,
                   "USD per hour of each machine, in report order")
      ->delimiter(',')
      ->check(number_in(kNonNegative));
  command->add_option("--watts", costs.watts, "power of each machine in watts, in report order")
      ->delimiter(',')
      ->check(number_in(kPositive));
  command->add_option("--costs", costs.costs_file,
                      "JSON file {\"REPORT\": {\"price_per_hour\": USD, \"watts\": W}}");
}

Subcommand register_compare(CLI::App& app) {
  CLI::App* compare = app.add_subcommand(
      "compare", "compare reports case by case: speed-up, 95% interval, significance");
  struct State {
    CompareOptions options;
    std::string format, threshold;
  };
  auto s = std::make_shared<State>();
  compare->add_option("reports", s->options.reports, "report files (the first is the reference)")
      ->required();
  compare->add_flag("--across-backends", s->options.across_backends,
                    "put the backends of each report side by side (CPU against GPU)");
  add_threshold(compare, s->threshold, "smallest change called faster / slower");
  add_cost_options(compare, s->options.costs);
  add_format(compare, s->format, kTableFormatsWithCsv);
  return {compare,
          [s] {
            s->options.threshold = parse_threshold(s->threshold);
            s->options.format = parse_table_format(s->format);
            return compare_command(s->options);
          },
          true};
}

// --run-statistic: what one run contributes (check, ab).
void add_run_statistic(CLI::App* command, std::string& statistic, const char* help) {
  statistic = "median";
  command->add_option("--run-statistic", statistic, help)->check(CLI::IsMember({"median", "min"}));
}

Subcommand register_check(CLI::App& app) {
  CLI::App* check = app.add_subcommand(
      "check",
      "CI gate on run-to-run variation: exit 1 when a case got slower beyond the threshold and "
      "the noise between runs, failed, or was lost");
  struct State {
    CheckOptions options;
    std::string format, threshold, statistic;
  };
  auto s = std::make_shared<State>();
  CheckOptions& options = s->options;
  check
      ->add_option("--baseline", options.baselines,
                   "baseline reports, one per run (each run's median is one observation; "
                   "3 or more test significance, one applies the threshold only)")
      ->expected(1, -1);
  check->add_option("--baseline-history", options.history,
                    "take the baseline runs from this history database (trainbench history): "
                    "the newest reports of this machine measured under the same conditions");
  check
      ->add_option("--history-runs", options.history_runs,
                   "baseline runs taken from --baseline-history (default 5)")
      ->check(whole_number_in(1, kMostRuns));
  check
      ->add_option("--current", options.currents,
                   "reports of the build to check, one per run (3 or more for significance)")
      ->required()
      ->expected(1, -1);
  add_threshold(check, s->threshold, "slow-down that fails the check");
  check->add_flag("--force", options.force,
                  "accept baselines from another machine or measured under other conditions");
  add_run_statistic(check, s->statistic,
                    "what one run contributes: its median sample (default) or min, its fastest "
                    "(steadier on a loaded machine)");
  check->add_flag("--allow-lost", options.allow_lost,
                  "list cases measured in the baseline and skipped, unimplemented or absent now "
                  "without failing");
  add_format(check, s->format, kTableFormats);
  return {check,
          [s] {
            s->options.threshold = parse_threshold(s->threshold);
            s->options.format = parse_table_format(s->format);
            s->options.statistic = parse_run_statistic(s->statistic);
            return check_command(s->options);
          },
          true};
}

Subcommand register_ab(CLI::App& app) {
  CLI::App* ab = app.add_subcommand(
      "ab",
      "run two builds alternating ABBA (A B, B A, A B, ...) on this machine and apply check's "
      "verdict to the runs; further options go to both builds' `run`");
  struct State {
    AbOptions options;
    std::string format, threshold, statistic;
  };
  auto s = std::make_shared<State>();
  AbOptions& options = s->options;
  ab->add_option("--baseline-bin", options.baseline_bin, "the old trainbench binary")->required();
  ab->add_option("--current-bin", options.current_bin, "the new trainbench binary")->required();
  ab->add_option("--rounds", options.rounds,
                 "rounds, each one run of each build (default 5, at least 3)")
      ->check(whole_number_in(1, kMostRuns));
  ab->add_flag("--allow-lost", options.allow_lost, "lost cases do not fail (see check)");
  add_run_statistic(ab, s->statistic, "median (default) or min (see check)");
  add_threshold(ab, s->threshold, "slow-down that fails");
  ab->add_option("--out-dir", options.out_dir,
                 "keep every round's report and the combined ones here");
  add_format(ab, s->format, kTableFormats, "--ab-format");
  ab->allow_extras();
  return {ab,
          [s, ab] {
            s->options.threshold = parse_threshold(s->threshold);
            s->options.format = parse_table_format(s->format);
            s->options.statistic = parse_run_statistic(s->statistic);
            s->options.run_arguments = ab->remaining();
            return ab_command(s->options);
          },
          true};
}

// A report command's options and the --format text they are parsed from.
template <class Options>
struct WithFormat {
  Options options;
  std::string format;
};

Subcommand register_summary(CLI::App& app) {
  CLI::App* summary = app.add_subcommand(
      "summary", "what a buyer asks, answered from the reports of one machine or several");
  auto s = std::make_shared<WithFormat<SummaryOptions>>();
  summary
      ->add_option("reports", s->options.reports,
                   "report files: those of one host are one machine's (bench/results/*/*.json: "
                   "every machine measured), several machines give the buyer's table")
      ->required();
  add_cost_options(summary, s->options.costs);
  add_format(summary, s->format, kTableFormats);
  return {summary,
          [s] {
            s->options.format = parse_table_format(s->format);
            return summary_command(s->options);
          },
          true};
}

Subcommand register_plan(CLI::App& app) {
  CLI::App* plan = app.add_subcommand(
      "plan", "the memory training a model needs, what fits on a device and with what sharding");
  auto s = std::make_shared<WithFormat<PlanOptions>>();
  PlanOptions& o = s->options;
  plan->add_option("-w,--workload", o.workload,
                   "a model workload: 'bert-train model=large batch=4 seq=128 dtype=bf16'");
  plan->add_option("--parameters", o.parameters, "or a model by its counts: parameters")
      ->check(CLI::PositiveNumber);
  plan->add_option("--activation-bytes-per-sample", o.activation_bytes_per_sample,
                   "activations kept for backward per sample (with their gradients)")
      ->check(CLI::PositiveNumber);
  plan->add_option("--recomputed-activation-bytes-per-sample",
                   o.recomputed_activation_bytes_per_sample, "the same with recomputation")
      ->check(CLI::PositiveNumber);
  plan->add_option("--dtype", o.dtype, "f32, or bf16 / f16 mixed precision")->capture_default_str();
  plan->add_option("--optimizer", o.optimizer, "sgd, adamw or lamb")->capture_default_str();
  plan->add_option("--batch", o.batch, "micro-batch per device")->capture_default_str();
  plan->add_option("--layers", o.layers, "layers of equal size (ZeRO-3's gathered layer)")
      ->check(CLI::NonNegativeNumber);
  plan->add_option("--memory-gib", o.memory_gib, "one device's memory")->check(CLI::PositiveNumber);
  plan->add_option("--report", o.report,
                   "a report: its device, a measured case of the model, an all-reduce sweep");
  plan->add_option("--devices", o.devices, "the devices at hand")->check(CLI::NonNegativeNumber);
  plan->add_option("--reserve-gib", o.reserve_gib, "kept back for the runtime and libraries")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  plan->add_option("--check", o.check,
                   "check the predictions against the measured peaks of this report's model "
                   "cases (exit 1 outside the tolerance)");
  add_format(plan, s->format, {kDefaultTableFormat, "markdown"});
  return {plan,
          [s] {
            s->options.format = parse_table_format(s->format);
            return plan_command(s->options);
          },
          true};
}

Subcommand register_history(CLI::App& app) {
  CLI::App* history = app.add_subcommand("history", "reports over time in a SQLite file");
  struct State {
    HistoryOptions options;
    std::string format, threshold;
  };
  auto s = std::make_shared<State>();
  HistoryOptions& options = s->options;
  history->add_option("--db", options.database, "history database file")->capture_default_str();
  add_format(history, s->format, kTableFormatsWithCsv);
  history->require_subcommand(1);
  CLI::App* add = history->add_subcommand("add", "add reports (a report already there is skipped)");
  add->add_option("reports", options.reports, "report files")->required();
  CLI::App* list = history->add_subcommand("list", "the reports in the history");
  CLI::App* trend = history->add_subcommand(
      "trend", "each matching case over commits and dates on one machine, change points marked");
  trend->add_option("--workload", options.workload, "descriptor text to match, e.g. 'gemm m=4096'")
      ->required();
  trend->add_option("--machine", options.fingerprint,
                    "machine fingerprint (default: the newest report's)");
  add_threshold(trend, s->threshold, "smallest change marked");
  return {history,
          [s, add, list] {
            s->options.format = parse_table_format(s->format);
            s->options.threshold = parse_threshold(s->threshold);
            if (*add) {
              checked_output(s->options.database);
              return history_add_command(s->options);
            }
            if (*list) return history_list_command(s->options);
            return history_trend_command(s->options);
          },
          true};
}

Subcommand register_report(CLI::App& app) {
  CLI::App* report = app.add_subcommand("report", "render reports as one self-contained HTML page");
  auto options = std::make_shared<HtmlOptions>();
  report->add_option("--html", options->out, "the HTML file to write")->required();
  report->add_option("reports", options->reports, "report files");
  report->add_option("--history", options->history,
                     "a history database: each case's time over its runs (history add)");
  return {report,
          [options] {
            checked_output(options->out);
            return html_report_command(*options);
          },
          true};
}

}  // namespace

namespace {

// What CLI11 would misread, said plainly before it parses: an unknown subcommand (it says
// only that one is required), an option left without its value (it takes the next option as
// the value, or says another option is missing), and an empty name in a comma-separated list
// (`-b ,` became "unknown backend '-w'").
// "--name" or "-x": a dash then a letter or a dash ("-5%" and "-1" are values, if bad ones).
bool looks_like_option(std::string_view argument) {
  return argument.size() > 1 && argument[0] == '-' &&
         (argument[1] == '-' || std::isalpha(static_cast<unsigned char>(argument[1])));
}

void refuse_misread_arguments(const CLI::App& app, int argc, char** argv) {
  const CLI::App* level = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument == "--") return;
    const auto subcommands = level->get_subcommands([](const CLI::App*) { return true; });
    if (!looks_like_option(argument)) {
      if (subcommands.empty()) continue;  // a positional value
      const auto named = std::find_if(subcommands.begin(), subcommands.end(),
                                      [&](const CLI::App* s) { return s->check_name(argument); });
      if (named == subcommands.end()) {
        std::vector<std::string> names;
        for (const CLI::App* s : subcommands) names.push_back(s->get_name());
        throw UsageError(fmt::format("unknown subcommand '{}'{} (expected one of: {})", argument,
                                     level == &app ? "" : " of " + level->get_name(),
                                     fmt::join(names, ", ")));
      }
      level = *named;
      continue;
    }
    const std::size_t equals = argument.find('=');
    const std::string name = argument.substr(0, equals);
    const auto options = level->get_options([&](const CLI::Option* option) {
      return option->check_name(name) && option->get_expected_min() > 0;
    });
    if (options.empty()) continue;  // a flag, or CLI11's to judge
    std::string value;
    if (equals != std::string::npos) {
      value = argument.substr(equals + 1);
    } else if (i + 1 < argc && !looks_like_option(argv[i + 1])) {
      value = argv[++i];
    } else {
      throw UsageError(fmt::format("{} needs a value{}", name,
                                   i + 1 < argc ? fmt::format(" before {}", argv[i + 1]) : ""));
    }
    if (const char delimiter = options.front()->get_delimiter(); delimiter != '\0') {
      const std::string doubled = {delimiter, delimiter};
      if (value.empty() || value.front() == delimiter || value.back() == delimiter ||
          value.find(doubled) != std::string::npos)
        throw UsageError(fmt::format("{} '{}' holds an empty name (names are separated by '{}')",
                                     name, value, delimiter));
    }
  }
}

}  // namespace

int run_command_line(int argc, char** argv, World& world, CommandLineMode mode) {
  CLI::App app{
      "trainbench: deep-learning training benchmarks on CPUs and GPUs, validated, as JSON reports"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  const std::vector<Subcommand> subcommands = {
      register_list(app),    register_info(app),  register_run(app, argc, argv, world),
      register_compare(app), register_check(app), register_ab(app),
      register_summary(app), register_plan(app),  register_history(app),
      register_report(app)};
  refuse_misread_arguments(app, argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());  // every parse error: one line, exit 2
  }
  for (const Subcommand& subcommand : subcommands) {
    if (!*subcommand.app) continue;
    if (mode == CommandLineMode::check_only) {
      if (subcommand.check) subcommand.check();
      return 0;
    }
    try {
      return subcommand.run();
    } catch (const nlohmann::json::exception& e) {
      if (!subcommand.reads_reports) throw;
      throw UsageError(fmt::format("a report holds what {} cannot read: {}",
                                   subcommand.app->get_name(), e.what()));
    }
  }
  throw UsageError("a subcommand is required");
}

}  // namespace tb
