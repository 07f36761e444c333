#include "bench/report_commands.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <span>

#include <fmt/format.h>

#include "workloads/descriptor.h"

#include "backends/files.h"
#include "backends/numbers.h"
#include "backends/status.h"
#include "reports/compare.h"
#include "reports/history.h"
#include "reports/html.h"
#include "reports/report.h"
#include "reports/stats.h"
#include "reports/summary.h"
#include "reports/text_table.h"

namespace tb {
namespace {

// The headline figure of a result, as its workload names it (result_headline).
std::string headline_metric(const ResultRecord& result) {
  const auto& figure = result.headline;
  if (!figure) return "-";
  const Headline& h = figure->headline;
  if (h.unit == "s") return format_seconds(figure->value);
  if (h.unit == "TFLOP/s") return fmt::format("{:.3f} {}", figure->value, h.unit);
  return fmt::format("{:.1f} {}", figure->value, h.unit);
}

// Speed-up of `current` over `baseline` (>1: faster) with its interval and the verdict.
std::string format_speedup(const SampleComparison& c) {
  return fmt::format("{:.2f}x [{:.2f}, {:.2f}] p={:.2g} {}", 1 / c.time_ratio, 1 / c.ci_high,
                     1 / c.ci_low, c.p_value, verdict_name(c.verdict));
}

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

std::string headline_text(const nlohmann::json& line) {
  std::string text = fmt::format("{} {}: {:.4g} {}", line["backend"].get<std::string>(),
                                 line["figure"].get<std::string>(), line["value"].get<double>(),
                                 line["unit"].get<std::string>());
  const std::string unit = line["unit"];
  if (line.contains("per_usd_per_hour"))
    text += fmt::format(", {:.4g} {} per $/h", line["per_usd_per_hour"].get<double>(), unit);
  if (line.contains("per_watt"))
    text += fmt::format(", {:.4g} {} per W ({:.4g} W {})", line["per_watt"].get<double>(), unit,
                        line["watts"].get<double>(), line["watts_source"].get<std::string>());
  if (line.contains("cost_usd")) text += fmt::format(", ${:.2f}", line["cost_usd"].get<double>());
  if (line.contains("energy_kwh"))
    text += fmt::format(", {:.3f} kWh ({:.4g} W {})", line["energy_kwh"].get<double>(),
                        line["watts"].get<double>(), line["watts_source"].get<std::string>());
  return text;
}

// A price (>= 0) or a power (> 0) from a costs file, a UsageError naming the file otherwise.
double cost_figure(const nlohmann::json& entry, const char* key, NumberRange range,
                   const std::string& file) {
  const nlohmann::json& value = entry.at(key);
  if (!value.is_number() || !range.contains(value.get<double>()))
    throw UsageError(fmt::format("costs file {}: {} must be a number {}, not {}", file, key,
                                 range.words(), value.dump()));
  return value.get<double>();
}

// The names a costs file may give a report by, the least specific first (a later one's entry
// wins): its folder (one machine's reports, bench/results/<machine>/), its file name, its path.
std::vector<std::string> names_in_costs_file(const std::string& path) {
  std::vector<std::string> names;
  const std::string folder = std::filesystem::path(path).parent_path().filename().string();
  if (!folder.empty() && folder != "." && folder != "..") names.push_back(folder);
  names.push_back(std::filesystem::path(path).filename().string());
  names.push_back(path);
  return names;
}

}  // namespace

std::vector<Costs> load_costs(const std::vector<std::string>& reports, const CostOptions& options) {
  std::vector<Costs> costs(reports.size());
  for (const auto* list : {&options.price_per_hour, &options.watts})
    if (!list->empty() && list->size() != reports.size())
      throw UsageError(fmt::format(
          "--price-per-hour and --watts take one value per report ({} reports, {} values)",
          reports.size(), list->size()));
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (!options.price_per_hour.empty()) costs[i].price_per_hour = options.price_per_hour[i];
    if (!options.watts.empty()) costs[i].watts = options.watts[i];
  }
  if (options.costs_file) {
    std::ifstream in(*options.costs_file);
    if (!in || std::filesystem::is_directory(*options.costs_file))
      throw UsageError(fmt::format("cannot read costs file {}: {}", *options.costs_file,
                                   in ? "it is a folder" : std::strerror(errno)));
    nlohmann::json file;
    try {
      file = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(
          fmt::format("costs file {} is not valid JSON: {}", *options.costs_file, e.what()));
    }
    if (!file.is_object())
      throw UsageError(
          fmt::format("costs file {} is not a JSON object of reports", *options.costs_file));
    // Every entry names a report given and holds known keys only: a misspelt one would
    // otherwise leave a machine's price or power silently unset.
    for (const auto& item : file.items()) {
      const std::string& key = item.key();
      const nlohmann::json& entry = item.value();
      const auto names_report = [&](const std::string& path) {
        const std::vector<std::string> names = names_in_costs_file(path);
        return std::find(names.begin(), names.end(), key) != names.end();
      };
      if (std::none_of(reports.begin(), reports.end(), names_report))
        throw UsageError(fmt::format("costs file {}: '{}' is none of the reports given ({})",
                                     *options.costs_file, key, fmt::join(reports, ", ")));
      if (!entry.is_object())
        throw UsageError(fmt::format("costs file {}: the entry of {} is not an object",
                                     *options.costs_file, key));
      for (const auto& [field, value] : entry.items())
        if (field != "price_per_hour" && field != "watts")
          throw UsageError(fmt::format(
              "costs file {}: unknown key '{}' in the entry of {} (expected price_per_hour, watts)",
              *options.costs_file, field, key));
    }
    for (std::size_t i = 0; i < reports.size(); ++i)
      for (const std::string& key : names_in_costs_file(reports[i]))
        if (file.contains(key)) {
          const auto& entry = file[key];
          if (entry.contains("price_per_hour"))
            costs[i].price_per_hour =
                cost_figure(entry, "price_per_hour", {.min = 0}, *options.costs_file);
          if (entry.contains("watts"))
            costs[i].watts =
                cost_figure(entry, "watts", {.min = 0, .min_excluded = true}, *options.costs_file);
        }
  }
  return costs;
}

TableFormat parse_table_format(const std::string& name) {
  if (name == "table") return TableFormat::table;
  if (name == "markdown") return TableFormat::markdown;
  if (name == "csv") return TableFormat::csv;
  if (name == "json") return TableFormat::json;
  throw UsageError(
      fmt::format("unknown format '{}' (expected table, markdown, csv or json)", name));
}

double parse_threshold(const std::string& text) {
  const bool percent = text.ends_with('%');
  const std::string_view number(text.data(), text.size() - (percent ? 1 : 0));
  const auto value =
      parse_number(number, {.min = 0, .max = percent ? 1000.0 : 10.0, .max_excluded = true});
  if (!value)
    throw UsageError(fmt::format(
        "bad threshold '{}' (expected a percentage like 5% or a fraction like 0.05, below 1000%)",
        text));
  return percent ? *value / 100 : *value;
}

nlohmann::json read_input_report(const std::string& path) {
  try {
    return read_report(path);
  } catch (const ReportError& e) {
    throw UsageError(e.what());
  }
}

namespace {

// One column's cell of a case: its figure and median, or its status ("-" when absent), as text
// into `out` and as JSON returned.
nlohmann::json compare_cell(const ResultRecord* result, const Column& column, std::string* out) {
  nlohmann::json cell = {{"column", column.label}};
  std::string text = "-";
  if (result && result->passed()) {
    text = fmt::format("{} ({})", headline_metric(*result), format_seconds(result->stats->median));
    if (const std::string caveats = result_caveats(*result); !caveats.empty()) {
      text += " " + caveats;
      cell["caveats"] = caveats;
    }
    cell["median_s"] = result->stats->median;
    cell["metrics"] = (*result->json)["metrics"];
  } else if (result) {
    text = case_status_name(result->status);
    cell["status"] = case_status_name(result->status);
    cell["reason_code"] = reason_code_name(result->reason_code);
  }
  *out = text;
  return cell;
}

// Each report's path, fingerprint and headline lines, above the table (not in CSV).
std::string report_headlines(const nlohmann::json& out, TableFormat format) {
  std::string text;
  const bool markdown = format == TableFormat::markdown;
  if (format != TableFormat::csv) {
    for (const auto& report : out["reports"]) {
      text +=
          fmt::format(fmt::runtime(markdown ? "**{}** ({})\n\n" : "{} ({})\n"),
                      report["path"].get<std::string>(), report["fingerprint"].get<std::string>());
      for (const auto& line : report["headline"])
        text += fmt::format(fmt::runtime(markdown ? "- {}\n" : "  {}\n"), headline_text(line));
      text += "\n";
    }
  }
  return text;
}

}  // namespace

int compare_command(const CompareOptions& options) {
  if (options.reports.size() < (options.across_backends ? 1u : 2u))
    throw UsageError("compare needs at least two reports (or one with --across-backends)");
  std::vector<nlohmann::json> reports;
  for (const std::string& path : options.reports) reports.push_back(read_input_report(path));
  const std::vector<Costs> costs = load_costs(options.reports, options.costs);

  std::vector<std::string> names;
  for (const std::string& path : options.reports)
    names.push_back(std::filesystem::path(path).filename().string());
  const CompareGrid grid = compare_grid(reports, names, options.across_backends);
  const auto& [columns, records, rows] = grid;

  nlohmann::json out = {{"reports", nlohmann::json::array()}, {"cases", nlohmann::json::array()}};
  for (std::size_t r = 0; r < reports.size(); ++r)
    out["reports"].push_back({{"path", options.reports[r]},
                              {"fingerprint", machine_fingerprint(reports[r])},
                              {"headline", headline_lines(reports[r], costs[r])}});

  std::vector<std::string> header = {"workload", "dtype"};
  if (!options.across_backends) header.push_back("backend");
  for (std::size_t c = 0; c < columns.size(); ++c) {
    header.push_back(columns[c].label);
    if (c > 0) header.push_back(fmt::format("vs {}", columns[0].label));
  }
  TextTable table(header);
  for (const auto& [key, cells] : rows) {
    const auto& [workload, dtype, backend] = key;
    std::vector<std::string> row = {workload, dtype};
    if (!options.across_backends) row.push_back(backend);
    nlohmann::json entry = {
        {"workload", workload}, {"dtype", dtype}, {"columns", nlohmann::json::array()}};
    if (!options.across_backends) entry["backend"] = backend;
    const ResultRecord* first = cells.count(0) ? cells.at(0) : nullptr;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const ResultRecord* result = cells.count(c) ? cells.at(c) : nullptr;
      std::string text;
      nlohmann::json cell = compare_cell(result, columns[c], &text);
      row.push_back(text);
      if (c == 0) {
        entry["columns"].push_back(cell);
        continue;
      }
      std::string versus = "-";
      if (first && result && first->passed() && result->passed()) {
        const SampleComparison comparison = compare_samples(
            (*first->json)["samples_s"].get<std::vector<double>>(),
            (*result->json)["samples_s"].get<std::vector<double>>(), options.threshold);
        versus = format_speedup(comparison);
        cell["versus_first"] = to_json(comparison);
      }
      row.push_back(versus);
      entry["columns"].push_back(cell);
    }
    table.add(std::move(row));
    out["cases"].push_back(entry);
  }

  if (options.format == TableFormat::json) {
    print(out.dump(2) + "\n");
    return 0;
  }
  print(report_headlines(out, options.format) + table.render(options.format));
  return 0;
}

namespace {

std::string key_text(const CaseKey& key) {
  return fmt::format("{} [{}] {}", key.backend, key.dtype, key.workload);
}

// "0.87x [0.80, 0.94] 5 vs 5 runs, run-to-run noise 3.1%": speed-up of the current runs over
// the baseline runs (>1: faster) with its 98% interval where tested.
std::string format_runs(const RunComparison& c) {
  std::string text = fmt::format("{:.2f}x", 1 / c.time_ratio);
  if (c.tested) text += fmt::format(" [{:.2f}, {:.2f}]", 1 / c.ci_high, 1 / c.ci_low);
  text += fmt::format(" {} vs {} run{}", c.baseline_runs, c.current_runs,
                      c.current_runs == 1 ? "" : "s");
  if (!c.note.empty()) text += ", " + c.note;
  return text;
}

int print_check(const CheckResult& check, TableFormat format, double threshold,
                RunStatistic statistic) {
  if (format == TableFormat::json) {
    nlohmann::json out = {{"passed", check.passed()},
                          {"threshold", threshold},
                          {"run_statistic", run_statistic_name(statistic)},
                          {"cases", nlohmann::json::array()}};
    for (const CheckEntry& entry : check.entries) {
      nlohmann::json item = {{"workload", entry.key.workload},
                             {"dtype", entry.key.dtype},
                             {"backend", entry.key.backend},
                             {"verdict", verdict_name(entry.verdict)}};
      if (entry.comparison) item["comparison"] = to_json(*entry.comparison);
      if (!entry.reason.empty()) item["reason"] = entry.reason;
      if (entry.reason_code != ReasonCode::none)
        item["reason_code"] = reason_code_name(entry.reason_code);
      if (!entry.caveats.empty()) item["caveats"] = entry.caveats;
      out["cases"].push_back(item);
    }
    print(out.dump(2) + "\n");
    return check.passed() ? 0 : 1;
  }
  std::string text;
  const bool markdown = format == TableFormat::markdown;
  for (Verdict verdict :
       {Verdict::failed, Verdict::lost, Verdict::slower, Verdict::library_changed,
        Verdict::inconclusive, Verdict::faster, Verdict::unchanged, Verdict::new_case}) {
    TextTable table({"case", "speed-up [98% CI], runs, verdict basis"});
    for (const CheckEntry& entry : check.entries)
      if (entry.verdict == verdict)
        table.add({key_text(entry.key) + (entry.caveats.empty() ? "" : " " + entry.caveats),
                   !entry.comparison      ? entry.reason
                   : entry.reason.empty() ? format_runs(*entry.comparison)
                                          : format_runs(*entry.comparison) + "; " + entry.reason});
    if (table.empty()) continue;
    const std::string title =
        verdict == Verdict::slower   ? "regressions"
        : verdict == Verdict::faster ? "improvements"
        : verdict == Verdict::library_changed
            ? std::string("library changed: a library differs, so not judged as the code's")
        : verdict == Verdict::lost
            ? std::string(check.allow_lost ? "lost (allowed)" : "lost: measured before, not now")
            : std::string(verdict_name(verdict));
    text += fmt::format(fmt::runtime(markdown ? "### {}\n\n{}\n" : "{}:\n{}\n"), title,
                        table.render(format));
  }
  text += fmt::format("check {} (threshold {:.1f}%, each run's {} sample)\n",
                      check.passed() ? "passed" : "FAILED", threshold * 100,
                      run_statistic_name(statistic));
  print(text);
  return check.passed() ? 0 : 1;
}

// Baselines (and further current runs) measured under other conditions than the first current
// run are refused unless forced, naming what differs.
void require_same_conditions(const std::vector<nlohmann::json>& baselines,
                             const std::vector<std::string>& names,
                             const std::vector<nlohmann::json>& currents,
                             const std::vector<std::string>& current_names, bool force) {
  if (force) return;
  const auto refuse = [&](const std::string& name, const ConditionMismatch& mismatch) {
    throw UsageError(fmt::format(
        "{} was measured under other conditions than {} ({}); use --force to compare anyway", name,
        current_names.front(), fmt::join(mismatch.differences, "; ")));
  };
  if (const auto mismatch = first_condition_mismatch(baselines, currents.front()))
    refuse(names[mismatch->index], *mismatch);
  if (const auto mismatch =
          first_condition_mismatch(std::span(currents).subspan(1), currents.front()))
    refuse(current_names[mismatch->index + 1], *mismatch);
}

}  // namespace

int check_command(const CheckOptions& options) {
  if (options.currents.empty()) throw UsageError("check needs --current");
  if (options.baselines.empty() == !options.history)
    throw UsageError("check needs --baseline reports or --baseline-history, one of the two");
  // Each file is one run: one given twice would be counted as two, or checked against itself.
  std::vector<std::string> files = options.baselines;
  files.insert(files.end(), options.currents.begin(), options.currents.end());
  for (std::size_t i = 0; i < files.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) {
      std::error_code error;
      if (files[i] == files[j] || std::filesystem::equivalent(files[i], files[j], error))
        throw UsageError(fmt::format(
            "{} is given twice{}: each report is one run, and a run checked against itself "
            "says nothing",
            files[i],
            j < options.baselines.size() && i >= options.baselines.size()
                ? " (as a baseline and as a current run)"
                : ""));
    }
  std::vector<nlohmann::json> baselines, currents;
  std::vector<std::string> names = options.baselines;
  for (const std::string& path : options.currents) currents.push_back(read_input_report(path));
  for (const std::string& path : options.baselines) baselines.push_back(read_input_report(path));
  if (options.history) {
    History history(*options.history, History::Access::read);
    BaselineSelection selection = select_baselines(
        history, currents, static_cast<std::size_t>(options.history_runs), options.force);
    if (selection.reports.empty())
      throw UsageError(fmt::format(
          "{} holds no report of this machine measured under these conditions ({} of other "
          "conditions)",
          *options.history, selection.other_conditions));
    for (nlohmann::json& report : selection.reports) {
      names.push_back(fmt::format("{} ({})", *options.history, report.value("started_at", "")));
      baselines.push_back(std::move(report));
    }
    fmt::print(stderr, "check: {} baseline runs from {}{}\n", baselines.size(), *options.history,
               selection.other_conditions
                   ? fmt::format(" ({} of other conditions left out)", selection.other_conditions)
                   : "");
  }
  require_same_conditions(baselines, names, currents, options.currents, options.force);
  CheckResult check = check_runs(baselines, currents, options.threshold, options.statistic);
  check.allow_lost = options.allow_lost;
  return print_check(check, options.format, options.threshold, options.statistic);
}

namespace {

// Runs one build's `trainbench run` into `out` and reads its report. A build that refuses the
// run's options (exit 2) is bad input; one that fails otherwise or writes no report is an
// error naming the build and the round.
nlohmann::json run_build(const std::string& binary, const std::vector<std::string>& arguments,
                         const std::string& out, int round) {
  std::vector<std::string> strings = {binary, "run"};
  strings.insert(strings.end(), arguments.begin(), arguments.end());
  strings.insert(strings.end(), {"-o", out});
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execv(binary.c_str(), argv.data());
    std::perror(binary.c_str());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
    throw UsageError(fmt::format(
        "{} refused the run's options in round {} (exit 2; its message is above)", binary, round));
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
    throw std::runtime_error(
        fmt::format("{} failed in round {} ({}; its output is above)", binary, round,
                    WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status))
                                      : fmt::format("killed by signal {}", WTERMSIG(status))));
  if (!std::filesystem::is_regular_file(out))
    throw std::runtime_error(
        fmt::format("{} wrote no report in round {} (exit {}): is it a trainbench binary?", binary,
                    round, WEXITSTATUS(status)));
  try {
    return read_report(out);
  } catch (const ReportError& e) {
    throw std::runtime_error(
        fmt::format("{} wrote no report ab can read in round {}: {}", binary, round, e.what()));
  }
}

}  // namespace

int ab_command(const AbOptions& options) {
  if (options.rounds < static_cast<int>(kMinRunsTested))
    throw UsageError(fmt::format(
        "ab needs at least {} rounds: with fewer, run-to-run significance is not tested",
        kMinRunsTested));
  for (const std::string& binary : {options.baseline_bin, options.current_bin})
    if (access(binary.c_str(), X_OK) != 0)
      throw UsageError(fmt::format("{} is not an executable", binary));
  FolderRemover temporary;  // ab's own folder, removed however the command ends
  std::string dir;
  if (options.out_dir) {
    dir = *options.out_dir;
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error || !std::filesystem::is_directory(dir))
      throw UsageError(fmt::format("--out-dir {} cannot be made a folder: {}", dir,
                                   error ? error.message() : "a file is there"));
  } else {
    std::string folder;
    try {
      folder = writable_temporary_folder();
    } catch (const FileError& e) {
      throw UsageError(e.what());
    }
    dir = (std::filesystem::path(folder) / fmt::format("trainbench-ab-{}", getpid())).string();
    std::filesystem::create_directories(dir);
    temporary.folder = dir;
  }
  std::vector<nlohmann::json> rounds[2];
  const std::string* binaries[2] = {&options.baseline_bin, &options.current_bin};
  for (int round = 0; round < options.rounds; ++round)
    for (int turn = 0; turn < 2; ++turn) {
      // ABBA: A B, B A, A B, ... so a drift of the machine (warming, a neighbour starting)
      // falls on both builds alike.
      const int side = round % 2 == 0 ? turn : 1 - turn;
      const std::string out =
          fmt::format("{}/{}-{}.json", dir, side == 0 ? "baseline" : "current", round);
      fmt::print(stderr, "ab: round {}/{}, {}\n", round + 1, options.rounds,
                 side == 0 ? "baseline" : "current");
      rounds[side].push_back(run_build(*binaries[side], options.run_arguments, out, round + 1));
    }
  if (options.out_dir) {
    write_file_atomically(dir + "/baseline-combined.json",
                          combine_rounds(rounds[0]).dump(2) + "\n");
    write_file_atomically(dir + "/current-combined.json", combine_rounds(rounds[1]).dump(2) + "\n");
  }
  CheckResult check = check_runs(rounds[0], rounds[1], options.threshold, options.statistic);
  check.allow_lost = options.allow_lost;
  return print_check(check, options.format, options.threshold, options.statistic);
}

int history_add_command(const HistoryOptions& options) {
  std::vector<nlohmann::json> reports;  // all checked before any is added
  for (const std::string& path : options.reports) reports.push_back(read_input_report(path));
  std::error_code error;
  const bool existed = std::filesystem::exists(options.database, error);
  std::size_t added = 0;
  try {
    History history(options.database, History::Access::write);
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const History::Added outcome =
          history.add(reports[i], std::filesystem::absolute(options.reports[i]).string());
      if (outcome.added) {
        ++added;
        fmt::print("added {}\n", options.reports[i]);
      } else {
        fmt::print(
            "already there: {} (the report added from {}: same machine, start, command, "
            "commit and results)\n",
            options.reports[i], outcome.existing_source);
      }
    }
  } catch (...) {
    // A history this command made and could not fill (a full disk) is not left behind empty.
    if (!existed && added == 0) remove_history_files(options.database);
    throw;
  }
  return 0;
}

int history_list_command(const HistoryOptions& options) {
  History history(options.database, History::Access::read);
  TextTable table({"id", "started", "commit", "cases", "machine", "source"});
  nlohmann::json out = nlohmann::json::array();
  for (const HistoryReport& r : history.list()) {
    table.add({std::to_string(r.id), r.started_at, r.git_commit.substr(0, 12),
               std::to_string(r.cases), r.fingerprint, r.source});
    out.push_back({{"id", r.id},
                   {"started_at", r.started_at},
                   {"git_commit", r.git_commit},
                   {"cases", r.cases},
                   {"fingerprint", r.fingerprint},
                   {"source", r.source}});
  }
  print(options.format == TableFormat::json ? out.dump(2) + "\n" : table.render(options.format));
  return 0;
}

int history_trend_command(const HistoryOptions& options) {
  History history(options.database, History::Access::read);
  const std::vector<TrendSeries> trend =
      history.trend(options.workload, options.fingerprint, options.threshold);
  if (trend.empty())
    throw UsageError(fmt::format(
        "no passed case in {} matches '{}' on {}", options.database, options.workload,
        options.fingerprint ? "machine " + *options.fingerprint : "its newest report's machine"));
  TextTable table({"backend", "dtype", "workload", "started", "commit", "median", "change"});
  nlohmann::json out = nlohmann::json::array();
  for (const TrendSeries& series : trend) {
    nlohmann::json points = nlohmann::json::array();
    for (const TrendPoint& p : series.points) {
      table.add({series.backend, series.dtype, series.workload, p.started_at,
                 p.git_commit.substr(0, 12), format_seconds(p.median_s),
                 p.change.empty() ? "" : "<- " + p.change});
      points.push_back({{"started_at", p.started_at},
                        {"git_commit", p.git_commit},
                        {"median_s", p.median_s},
                        {"change", p.change}});
    }
    out.push_back({{"workload", series.workload},
                   {"dtype", series.dtype},
                   {"backend", series.backend},
                   {"points", points}});
  }
  print(options.format == TableFormat::json ? out.dump(2) + "\n" : table.render(options.format));
  return 0;
}

int html_report_command(const HtmlOptions& options) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, nlohmann::json>> reports;
  for (const std::string& path : options.reports) {
    std::error_code error;
    if (fs::exists(options.out) && fs::equivalent(options.out, path, error))
      throw UsageError(
          fmt::format("{} is an input report; refusing to write over it", options.out));
    reports.emplace_back(fs::path(path).filename().string(), read_input_report(path));
  }
  if (reports.empty() && !options.history)
    throw UsageError("report --html needs report files, a --history database, or both");
  std::vector<TrendSeries> history;
  if (options.history)  // every case, check's threshold
    history = History(*options.history, History::Access::read).trend("", std::nullopt, 0.05);
  try {
    write_file_atomically(options.out, render_html(reports, history));
  } catch (const FileError& e) {
    throw UsageError(e.what());
  }
  fmt::print("wrote {}\n", options.out);
  return 0;
}

}  // namespace tb
