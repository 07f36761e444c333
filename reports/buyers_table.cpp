#include "reports/buyers_table.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "backends/status.h"
#include "reports/case_family.h"
#include "reports/case_resources.h"
#include "reports/result_record.h"
#include "workloads/registry.h"

namespace tb {
namespace {

bool has_gpu(const nlohmann::json& report) {
  for (const auto& backend : report["backends"])
    if (backend["device"].is_object() && backend["device"].value("kind", "") == "gpu") return true;
  return false;
}

// The device a machine is named by: its first GPU's model, else its first CPU's.
std::string device_model(const nlohmann::json& report) {
  std::string cpu;
  for (const auto& backend : report["backends"]) {
    if (!backend["device"].is_object()) continue;
    const std::string model = backend["device"].value("model", "");
    if (backend["device"].value("kind", "") == "gpu") return model;
    if (cpu.empty()) cpu = model;
  }
  return cpu.empty() ? report["host"].value("cpu_model", "") : cpu;
}

// "sample" from "samples/s", "TFLOP" from "TFLOP/s"; a time to train is counted per run.
std::string unit_of_work(const Headline& headline) {
  if (headline.lower_is_better) return "run";
  std::string unit = headline.unit.substr(0, headline.unit.rfind("/s"));
  const bool word = std::all_of(unit.begin(), unit.end(), [](char c) { return std::islower(c); });
  if (word && unit.size() > 1 && unit.back() == 's') unit.pop_back();
  return unit;
}

std::string class_name(CaseClass kind) {
  switch (kind) {
    case CaseClass::training:
      return "training";
    case CaseClass::time_to_train:
      return "time-to-train";
    case CaseClass::product:
      return "product";
    case CaseClass::bandwidth:
      return "bandwidth";
    case CaseClass::transfer:
      return "transfer";
    case CaseClass::collective:
      return "collective";
    case CaseClass::peak:
      return "peak";
  }
  return "";
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// What one unit of work costs a machine: the joules and dollars of one unit (one run for a
// time-to-train), where its power and price are known.
struct UnitCost {
  std::optional<double> joules, dollars;
  std::string power_source;  // "measured 700 W (NVML)", "given 700 W"

  UnitCost(const ResultRecord& result, const Costs& costs) {
    const HeadlineValue& h = *result.headline;
    // Seconds of the machine that one unit of work takes.
    const double seconds = h.headline.lower_is_better ? h.value : 1 / h.value;
    const std::optional<CaseEnergy> energy = read_case_energy(*result.json);
    if (energy && energy->average_w) {
      joules = *energy->average_w * seconds;
      power_source = fmt::format("measured {:.0f} W ({})", *energy->average_w, energy->source);
    } else if (costs.watts) {
      joules = *costs.watts * seconds;
      power_source = fmt::format("given {:.0f} W", *costs.watts);
    }
    if (costs.price_per_hour) dollars = *costs.price_per_hour / 3600 * seconds;
  }
};

std::string energy_text(const UnitCost& c, const std::string& unit) {
  if (!c.joules) return "-";
  return unit == "run" ? fmt::format("{:.3g} kWh ({})", *c.joules / 3.6e6, c.power_source)
                       : fmt::format("{:.3g} J/{} ({})", *c.joules, unit, c.power_source);
}

// Dollars per run, or per million units of a rate (a sample costs micro-dollars).
std::string cost_text(const UnitCost& c, const std::string& unit) {
  if (!c.dollars) return "-";
  return unit == "run" ? fmt::format("${:.3g}", *c.dollars)
                       : fmt::format("${:.3g} per 1M {}s", *c.dollars * 1e6, unit);
}

std::string hours_text(double seconds) {
  return seconds >= 3600 ? fmt::format("{:.3g} h", seconds / 3600)
                         : fmt::format("{:.3g} min", seconds / 60);
}

// "0.12x to 0.5x" over the families, or "0.12x" where they all agree.
std::string range_text(const std::vector<double>& ratios) {
  const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
  return *low == *high ? fmt::format("{:.3g}x", *low)
                       : fmt::format("{:.3g}x to {:.3g}x", *low, *high);
}

// The batch of a training case's size ("batch=256"), 0 where it has none or not as a number.
long batch_of(const std::string& size) {
  const std::size_t at = size.find("batch=");
  long batch = 0;
  if (at != std::string::npos)
    std::from_chars(size.data() + at + 6, size.data() + size.size(), batch);
  return batch;
}

// The ranks a report's run had: 1 for a report without a world (a PyTorch peer's).
int world_size(const nlohmann::json& report) {
  const auto world = report.find("world");
  return world != report.end() && world->is_object() ? world->value("size", 1) : 1;
}

bool is_peer(const std::string& backend) {
  return backend.starts_with("pytorch");
}

// A result in its family.
struct FamilyCase {
  const ResultRecord* result = nullptr;
  CaseFamily family;
};

// One machine's results by family: the passed ones, the best of each backend, best first; and
// the first that did not pass (trainbench's own before a peer's).
struct MachineCases {
  const MachineReport* machine = nullptr;
  std::vector<ResultRecord> results;
  bool gpu = false;
  std::map<std::string, std::vector<FamilyCase>> passed;
  std::map<std::string, FamilyCase> unpassed;

  MachineCases(const MachineReport& m, std::map<std::string, CaseFamily>* families)
      : machine(&m), results(read_results(*m.report)), gpu(has_gpu(*m.report)) {
    const int world = world_size(*m.report);
    for (const ResultRecord& r : results) {
      FamilyCase c{&r, {}};
      try {
        c.family = case_family(r.key.workload, r.json->value("world_size", world));
      } catch (const UsageError&) {
        continue;  // a kind this build does not know (a newer report): nothing to pair it with
      }
      // A collective at one rank moves nothing between ranks: no figure to compare.
      if (c.family.kind == CaseClass::collective && c.family.key.ends_with(" ranks=1")) continue;
      families->emplace(c.family.key, c.family);
      if (r.passed() && r.headline && r.headline->value > 0)
        add_passed(c);
      else if (!unpassed.count(c.family.key) || is_peer(unpassed[c.family.key].result->key.backend))
        unpassed[c.family.key] = c;
    }
    for (auto& [key, cases] : passed)
      std::stable_sort(cases.begin(), cases.end(), [](const FamilyCase& a, const FamilyCase& b) {
        return headline_ratio(*a.result, *b.result).value_or(0) > 1;
      });
  }

  void add_passed(const FamilyCase& c) {
    std::vector<FamilyCase>& cases = passed[c.family.key];
    for (FamilyCase& other : cases)
      if (other.result->key.backend == c.result->key.backend) {
        if (headline_ratio(*c.result, *other.result).value_or(0) > 1) other = c;
        return;
      }
    cases.push_back(c);
  }

  // The best of trainbench's own backends: a PyTorch peer's figure is listed, never the
  // machine's figure that ratios use.
  const FamilyCase* best(const std::string& family) const {
    const auto it = passed.find(family);
    if (it == passed.end()) return nullptr;
    for (const FamilyCase& c : it->second)
      if (!is_peer(c.result->key.backend)) return &c;
    return nullptr;
  }

  // The backend a command for this machine names: cuda on a GPU machine, else its oneDNN
  // backend (or its first CPU backend).
  std::string backend() const {
    if (gpu) return "cuda";
    std::string first;
    for (const auto& b : (*machine->report)["backends"]) {
      const std::string name = b.value("name", "");
      if (name == "cpu-onednn") return name;
      if (first.empty() && name.starts_with("cpu-")) first = name;
    }
    return first.empty() ? "cpu-onednn" : first;
  }
};

// The case of a family that a machine's own suite runs (the gpu suite on a GPU machine, full
// then quick on a CPU one): the case that would answer it at that machine's natural size.
struct SuiteCases {
  std::map<std::string, std::string> gpu, cpu;
  std::set<std::string> full;  // the families of the full suite

  SuiteCases() {
    for (const char* suite : {"gpu", "full", "quick"})
      for (const Descriptor& d : load_suite(suite)) {
        const std::string line = d.to_string();
        const std::string key = case_family(line).key;
        if (std::string(suite) == "full") full.insert(key);
        if (std::string(suite) != "gpu") cpu.emplace(key, line);
        if (std::string(suite) != "quick") gpu.emplace(key, line);
      }
  }
};

// The table's rows, what it could not answer, and the ratios the answer sums up.
struct BuyersTable {
  std::vector<MachineCases> machines;
  std::map<std::string, CaseFamily> families;
  std::size_t baseline = 0;
  TextTable figures{{}};
  // What a machine lacks, in table order; the text table groups the many single-op families a
  // machine did not run (a CPU's full suite on a GPU machine), the JSON lists every one.
  struct Missing {
    const CaseFamily* family;
    std::size_t machine;
    std::string why, command;
    bool in_full;
  };
  std::vector<Missing> missing;
  nlohmann::json rows = nlohmann::json::array(), not_answered = nlohmann::json::array();
  std::vector<std::string> from;
  // Per machine other than the baseline: its best over the baseline's best, per family.
  std::map<std::size_t, std::vector<double>> speeds, training_speeds, energies, costs;

  explicit BuyersTable(const std::vector<MachineReport>& reports) {
    for (const MachineReport& m : reports) machines.emplace_back(m, &families);
    baseline = machines.size() - 1;  // GPU machines come first: a CPU one where there is one
    figures = TextTable({"workload", "machine", "backend", "size", "figure",
                         "over " + label(baseline), "step at the global batch", "time-to-train",
                         "energy per unit", "cost per unit"});
  }

  const std::string& label(std::size_t m) const { return machines[m].machine->label; }

  std::vector<const CaseFamily*> ordered_families() const {
    std::vector<const CaseFamily*> ordered;
    for (const auto& [key, family] : families) ordered.push_back(&family);
    std::stable_sort(ordered.begin(), ordered.end(), [](const CaseFamily* a, const CaseFamily* b) {
      return std::tie(a->kind, a->label) < std::tie(b->kind, b->label);
    });
    return ordered;
  }

  void add_family(const CaseFamily& family, const SuiteCases& suites) {
    std::set<std::string> sizes;
    long global_batch = 0;
    for (const MachineCases& m : machines)
      if (const auto it = m.passed.find(family.key); it != m.passed.end())
        for (const FamilyCase& c : it->second) {
          sizes.insert(c.family.size);
          global_batch = std::max(global_batch, batch_of(c.family.size));
        }
    const FamilyCase* base = machines[baseline].best(family.key);
    for (std::size_t m = 0; m < machines.size(); ++m) {
      const FamilyCase* best = machines[m].best(family.key);
      if (!best) add_missing(family, m, suites);
      const auto it = machines[m].passed.find(family.key);
      if (it == machines[m].passed.end()) continue;
      if (family.kind != CaseClass::training)  // the best backend only
        add_row(family, m, best ? *best : it->second.front(), base, sizes.size() > 1, global_batch);
      else
        for (const FamilyCase& c : it->second)
          add_row(family, m, c, base, sizes.size() > 1, global_batch);
      if (best && base && m != baseline) add_ratios(m, *best, *base);
    }
  }

  void add_ratios(std::size_t m, const FamilyCase& c, const FamilyCase& base) {
    const std::optional<double> speed = headline_ratio(*c.result, *base.result);
    if (!speed) return;
    speeds[m].push_back(*speed);
    if (c.family.kind == CaseClass::training) training_speeds[m].push_back(*speed);
    const UnitCost mine(*c.result, machines[m].machine->costs),
        theirs(*base.result, machines[baseline].machine->costs);
    if (mine.joules && theirs.joules) energies[m].push_back(*mine.joules / *theirs.joules);
    if (mine.dollars && theirs.dollars) costs[m].push_back(*mine.dollars / *theirs.dollars);
  }

  // One piece: a row's cells and its JSON, side by side so that they cannot disagree.
  void add_row(const CaseFamily& family, std::size_t m, const FamilyCase& c, const FamilyCase* base,
               bool sizes_differ, long global_batch) {
    const ResultRecord& r = *c.result;
    const HeadlineValue& h = *r.headline;
    const std::string unit = unit_of_work(h.headline);
    const UnitCost cost(r, machines[m].machine->costs);
    std::string over_text = "-";
    nlohmann::json over = nullptr;
    if (const auto ratio = base ? headline_ratio(r, *base->result) : std::nullopt) {
      over = *ratio;
      over_text = fmt::format("{:.3g}x", *ratio);
    }
    nlohmann::json row = {{"family", family.key},
                          {"workload", family.label},
                          {"class", class_name(family.kind)},
                          {"machine", label(m)},
                          {"backend", r.key.backend},
                          {"case", r.key.workload},
                          {"size", c.family.size},
                          {"sizes_differ", sizes_differ},
                          {"metric", h.headline.metric},
                          {"unit", h.headline.unit},
                          {"value", h.value},
                          {"over_baseline", over},
                          {"unit_of_work", unit},
                          {"joules_per_unit", optional_json(cost.joules)},
                          {"power", cost.power_source},
                          {"usd_per_unit", optional_json(cost.dollars)}};
    std::string step = "-", time_to_train = "-";
    if (family.kind == CaseClass::training && global_batch > 0) {
      const double seconds = global_batch / h.value;
      step = fmt::format("{} at {}", format_seconds(seconds), global_batch);
      row["global_batch"] = global_batch;
      row["step_s"] = seconds;
      if (const ProjectionRecipe* recipe = projection_recipe(Descriptor::parse(r.key.workload))) {
        row["time_to_train_s"] = projected_training_seconds(*recipe, h.value);
        row["time_to_train"] = "projected";
        time_to_train = hours_text(row["time_to_train_s"]) + " (projected)";
      }
    } else if (family.kind == CaseClass::time_to_train && h.headline.lower_is_better) {
      row["time_to_train_s"] = h.value;
      row["time_to_train"] = "measured";
      time_to_train = hours_text(h.value) + " (measured)";
    }
    const std::string value = h.headline.lower_is_better
                                  ? format_seconds(h.value)
                                  : fmt::format("{:.4g} {}", h.value, h.headline.unit);
    figures.add({family.label, label(m), r.key.backend,
                 (c.family.size.empty() ? "-" : c.family.size) + (sizes_differ ? " *" : ""), value,
                 over_text, step, time_to_train, energy_text(cost, unit), cost_text(cost, unit)});
    rows.push_back(std::move(row));
    from.push_back(fmt::format("{}: {} {}: {}", label(m), r.key.backend, r.key.workload, value));
  }

  // Why machine `m` has no figure for `family`, and the command that would give it one.
  void add_missing(const CaseFamily& family, std::size_t m, const SuiteCases& suites) {
    const MachineCases& machine = machines[m];
    std::string why = "not run", command;
    std::string backend = machine.backend(), workload;
    if (const auto it = machine.unpassed.find(family.key); it != machine.unpassed.end()) {
      const ResultRecord& r = *it->second.result;
      std::string reason = r.reason.size() > 160 ? r.reason.substr(0, 157) + "..." : r.reason;
      if (!r.passed())
        why = fmt::format("{} on {}: {}", case_status_name(r.status), r.key.backend, reason);
      else
        why = fmt::format("passed on {} with no figure", r.key.backend);
      if (!is_peer(r.key.backend)) backend = r.key.backend, workload = r.key.workload;
    }
    if (machine.passed.count(family.key)) why += " (a PyTorch peer's figure is listed)";
    if (family.kind == CaseClass::transfer && !machine.gpu) {
      why = "no GPU: host-device copies need one";
    } else {
      if (workload.empty()) {
        const auto& natural = machine.gpu ? suites.gpu : suites.cpu;
        if (const auto it = natural.find(family.key); it != natural.end()) workload = it->second;
      }
      if (workload.empty())  // at another machine's size: no suite of this one runs the family
        for (const MachineCases& other : machines)
          if (const FamilyCase* best = other.best(family.key))
            workload = best->result->key.workload;
      if (workload.empty())
        for (const MachineCases& other : machines)
          if (const auto it = other.unpassed.find(family.key); it != other.unpassed.end())
            workload = it->second.result->key.workload;
      command = fmt::format("trainbench run -b {} -w '{}'", backend, workload);
    }
    if (family.kind == CaseClass::collective) command = "mpirun -np 2 " + command;
    missing.push_back({&family, m, why, command, suites.full.count(family.key) > 0});
    not_answered.push_back({{"family", family.key},
                            {"workload", family.label},
                            {"machine", label(m)},
                            {"why", why},
                            {"command", command}});
  }

  // Every training and failed family alone; single-op families not run on a machine, where more
  // than kListedAlone of one kind, as one row with one command.
  TextTable missing_table() const {
    constexpr std::size_t kListedAlone = 3;
    const auto grouped = [](const Missing& m) {
      return m.why == "not run" && m.family->kind != CaseClass::training &&
             m.family->kind != CaseClass::time_to_train;
    };
    const auto kind_of = [](const Missing& m) { return descriptor_kind(m.family->label); };
    std::map<std::tuple<std::size_t, std::string, bool>, std::size_t> groups;
    for (const Missing& m : missing)
      if (grouped(m)) ++groups[{m.machine, kind_of(m), m.in_full}];
    TextTable table({"workload", "machine", "why", "to answer it"});
    std::set<std::tuple<std::size_t, std::string, bool>> shown;
    for (const Missing& m : missing) {
      const auto group = std::make_tuple(m.machine, kind_of(m), m.in_full);
      if (!grouped(m) || groups[group] <= kListedAlone) {
        table.add({m.family->label, label(m.machine), m.why, m.command.empty() ? "-" : m.command});
      } else if (shown.insert(group).second) {
        table.add({fmt::format("{} ({} families)", kind_of(m), groups[group]), label(m.machine),
                   "not run",
                   m.in_full ? fmt::format("trainbench run -b {} --suite full",
                                           machines[m.machine].backend())
                             : "each family's command: --format json, not_answered"});
      }
    }
    return table;
  }

  // "h200 over cpu: throughput 12x to 40x over 9 families (training 30x), energy per unit ..."
  std::string summed_up(std::size_t m) const {
    const auto find = [](const auto& map, std::size_t key) {
      const auto it = map.find(key);
      return it == map.end() ? std::vector<double>{} : it->second;
    };
    const std::vector<double> speed = find(speeds, m), training = find(training_speeds, m),
                              energy = find(energies, m), cost = find(costs, m);
    if (speed.empty())
      return fmt::format("{}: no family in common with {}", label(m), label(baseline));
    std::string text = fmt::format("{} over {}: throughput {} over {} families", label(m),
                                   label(baseline), range_text(speed), speed.size());
    // The seeds' "1 hour against 24+ hours", measured: an hour's training on this machine takes
    // the baseline this many hours.
    const auto [slow, fast] = std::minmax_element(training.begin(), training.end());
    text += training.empty()
                ? " (no training case in common)"
                : fmt::format(" (training {}: an hour's training here takes {} {:.3g}{} h)",
                              range_text(training), label(baseline), *slow,
                              *slow == *fast ? "" : fmt::format(" to {:.3g}", *fast));
    text += energy.empty()
                ? "; energy per unit needs a measured power or --watts for both"
                : fmt::format(", energy per unit {}{}", range_text(energy),
                              energy.size() < speed.size() ? " (where both have a power)" : "");
    text += cost.empty() ? "; cost per unit needs --price-per-hour for both"
                         : fmt::format(", cost per unit {}", range_text(cost));
    return text;
  }
};

// Reports of one host agree on these.
std::string host_identity(const nlohmann::json& report) {
  const nlohmann::json& host = report.at("host");
  return fmt::format("{}|{}|{}|{}", host.value("hostname", ""), host.value("cpu_model", ""),
                     host.value("logical_cpus", 0), host.value("memory_bytes", 0.0));
}

void merge_costs(std::optional<double>* into, const std::optional<double>& given,
                 const std::string& what, const HostReports& machine) {
  if (!given) return;
  if (*into && **into != *given)
    throw UsageError(
        fmt::format("{} and another report of the same machine ({}) are given different "
                    "{}s: {} and {}",
                    machine.files.back(), machine.label, what, **into, *given));
  *into = given;
}

}  // namespace

std::vector<HostReports> group_by_machine(const std::vector<ReportFile>& files) {
  std::vector<HostReports> machines;
  std::vector<std::string> identities;
  std::set<std::string> paths;
  for (const ReportFile& file : files) {
    if (!paths
             .insert(
                 std::filesystem::weakly_canonical(std::filesystem::absolute(file.path)).string())
             .second)
      throw UsageError(fmt::format("report {} is given twice", file.path));
    const std::string identity = host_identity(file.report);
    std::size_t index =
        std::find(identities.begin(), identities.end(), identity) - identities.begin();
    if (index == identities.size()) {
      identities.push_back(identity);
      machines.push_back({"", file.report, {}, {}});
      machines.back().report["results"] = nlohmann::json::array();
    }
    HostReports& machine = machines[index];
    machine.files.push_back(file.path);
    for (const auto& backend : file.report["backends"]) {
      const auto& known = machine.report["backends"];
      if (std::none_of(known.begin(), known.end(),
                       [&](const auto& b) { return b["name"] == backend["name"]; }))
        machine.report["backends"].push_back(backend);
    }
    const int world = world_size(file.report);
    for (nlohmann::json result : file.report["results"]) {
      result["world_size"] = world;  // a collective's rank count, whichever report it came from
      machine.report["results"].push_back(std::move(result));
    }
    merge_costs(&machine.costs.price_per_hour, file.costs.price_per_hour, "price per hour",
                machine);
    merge_costs(&machine.costs.watts, file.costs.watts, "power", machine);
  }
  // Labels: the folder where it holds this machine's reports only, else the first file's name.
  std::map<std::string, std::set<std::size_t>> machines_in;
  for (std::size_t i = 0; i < machines.size(); ++i)
    for (const std::string& path : machines[i].files)
      machines_in[std::filesystem::path(path).parent_path().string()].insert(i);
  std::set<std::string> labels;
  for (std::size_t i = 0; i < machines.size(); ++i) {
    const std::filesystem::path folder = std::filesystem::path(machines[i].files[0]).parent_path();
    const bool own_folder =
        !folder.filename().empty() && folder.filename() != "." &&
        machines_in[folder.string()].size() == 1 &&
        std::all_of(machines[i].files.begin(), machines[i].files.end(), [&](const std::string& p) {
          return std::filesystem::path(p).parent_path() == folder;
        });
    std::string label = own_folder
                            ? folder.filename().string()
                            : std::filesystem::path(machines[i].files[0]).filename().string();
    for (int n = 2; labels.count(label); ++n) label = fmt::format("{} ({})", label, n);
    labels.insert(label);
    machines[i].label = label;
  }
  return machines;
}

nlohmann::json merged_report(const std::vector<MachineReport>& machines) {
  std::map<std::string, int> machines_running;  // backend -> how many machines ran it
  for (const MachineReport& m : machines)
    for (const auto& backend : (*m.report)["backends"]) ++machines_running[backend["name"]];
  nlohmann::json merged = *machines.front().report;
  merged["backends"] = nlohmann::json::array();
  merged["results"] = nlohmann::json::array();
  for (const MachineReport& m : machines) {
    const auto named = [&](const std::string& backend) {
      return machines_running[backend] > 1 ? backend + " on " + m.label : backend;
    };
    for (nlohmann::json backend : (*m.report)["backends"]) {
      backend["name"] = named(backend["name"]);
      merged["backends"].push_back(std::move(backend));
    }
    for (nlohmann::json result : (*m.report)["results"]) {
      result["backend"] = named(result["backend"]);
      merged["results"].push_back(std::move(result));
    }
  }
  return merged;
}

std::vector<Answer> machine_answers(const std::vector<MachineReport>& machines) {
  std::vector<Answer> answers =
      summary_answers(machines.size() == 1 ? *machines.front().report : merged_report(machines));
  answers.push_back(buyers_table_answer(machines));
  return answers;
}

Answer buyers_table_answer(std::vector<MachineReport> machines) {
  Answer a{
      "Buyer's table: each machine's figures by what it trains and computes, machine against "
      "machine, with energy and cost per unit of work",
      "",
      {}};
  std::stable_partition(machines.begin(), machines.end(),
                        [](const MachineReport& m) { return has_gpu(*m.report); });
  BuyersTable table(machines);
  const SuiteCases suites;
  for (const CaseFamily* family : table.ordered_families()) table.add_family(*family, suites);
  a.data = {{"machines", nlohmann::json::array()},
            {"baseline", table.label(table.baseline)},
            {"rows", table.rows},
            {"not_answered", table.not_answered}};
  std::vector<std::string> names;
  for (const MachineReport& m : machines) {
    a.data["machines"].push_back({{"label", m.label},
                                  {"device", device_model(*m.report)},
                                  {"gpu", has_gpu(*m.report)},
                                  {"price_per_hour", optional_json(m.costs.price_per_hour)},
                                  {"watts", optional_json(m.costs.watts)}});
    names.push_back(fmt::format("{} ({})", m.label, device_model(*m.report)));
  }
  if (machines.size() < 2) {
    a.answer = fmt::format(
        "not compared: one machine, {}; give each machine's reports, with their prices and "
        "powers where known (`trainbench summary gpu.json cpu.json --price-per-hour 12,4 --watts "
        "1000,400`, or `trainbench summary bench/results/*/*.json`)",
        names[0]);
  } else {
    std::vector<std::string> parts;
    for (std::size_t m = 0; m < machines.size(); ++m)
      if (m != table.baseline) parts.push_back(table.summed_up(m));
    a.answer = fmt::format("{}: {}", fmt::join(names, ", "), fmt::join(parts, "; "));
  }
  if (!table.not_answered.empty())
    a.answer += fmt::format(
        "; {} figure(s) of a machine not answered (the last table says why and "
        "which case would answer each)",
        table.not_answered.size());
  a.from = table.from;
  a.tables.push_back(table.figures);
  a.titles.push_back(fmt::format(
      "Each machine's figure per workload family, at the size its suite ran (* where the "
      "machines' sizes differ); training cases every backend, the rest the best; the ratio is "
      "over {}'s best; a training step at the largest batch any machine ran; energy from the "
      "power the case's counters measured, else the power given:",
      table.label(table.baseline)));
  if (!table.not_answered.empty()) {
    a.tables.push_back(table.missing_table());
    a.titles.push_back("Not answered, and the case that would answer it:");
  }
  return a;
}

}  // namespace tb
