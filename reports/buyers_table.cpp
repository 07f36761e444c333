#include "reports/buyers_table.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "reports/case_resources.h"
#include "reports/result_record.h"

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
  return cpu;
}

// "sample" from "samples/s", "TFLOP" from "TFLOP/s"; a time to train is counted per run.
std::string unit_of_work(const Headline& headline) {
  if (headline.lower_is_better) return "run";
  std::string unit = headline.unit.substr(0, headline.unit.rfind("/s"));
  const bool word = std::all_of(unit.begin(), unit.end(), [](char c) { return std::islower(c); });
  if (word && unit.size() > 1 && unit.back() == 's') unit.pop_back();
  return unit;
}

// What one unit of work costs a machine: its best result and, where known, the joules and
// dollars of one unit (one run for a time-to-train).
struct MachineCase {
  const ResultRecord* result = nullptr;
  std::optional<double> joules, dollars;
  std::string power_source;  // "measured (powercap)", "given 700 W"

  MachineCase(const ResultRecord& best, const Costs& costs) : result(&best) {
    const HeadlineValue& h = *best.headline;
    // Seconds of the machine that one unit of work takes.
    const double seconds = h.headline.lower_is_better ? h.value : 1 / h.value;
    const std::optional<CaseEnergy> energy = read_case_energy(*best.json);
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

// Each workload's best passed result on one machine.
std::map<std::string, const ResultRecord*> best_by_workload(
    const std::vector<ResultRecord>& results) {
  std::map<std::string, const ResultRecord*> best;
  for (const ResultRecord& r : results) {
    if (!r.passed() || !r.headline || r.headline->value <= 0) continue;
    const ResultRecord*& slot = best[r.key.workload];
    if (!slot || headline_ratio(r, *slot).value_or(0) > 1) slot = &r;
  }
  return best;
}

std::string value_text(const HeadlineValue& h) {
  return h.headline.lower_is_better ? format_seconds(h.value)
                                    : fmt::format("{:.4g} {}", h.value, h.headline.unit);
}

std::string energy_text(const MachineCase& c, const std::string& unit) {
  if (!c.joules) return "-";
  return unit == "run" ? fmt::format("{:.3g} kWh ({})", *c.joules / 3.6e6, c.power_source)
                       : fmt::format("{:.3g} J/{} ({})", *c.joules, unit, c.power_source);
}

// Dollars per run, or per million units of a rate (a sample costs micro-dollars).
std::string cost_text(const MachineCase& c, const std::string& unit) {
  if (!c.dollars) return "-";
  return unit == "run" ? fmt::format("${:.3g}", *c.dollars)
                       : fmt::format("${:.3g} per 1M {}s", *c.dollars * 1e6, unit);
}

std::optional<double> ratio(const std::optional<double>& a, const std::optional<double>& b) {
  return a && b && *b > 0 ? std::optional<double>(*a / *b) : std::nullopt;
}

std::string ratio_text(const std::optional<double>& r) {
  return r ? fmt::format("{:.3g}x", *r) : "-";
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json case_json(const MachineCase& c) {
  return {{"backend", c.result->key.backend},
          {"value", c.result->headline->value},
          {"joules_per_unit", optional_json(c.joules)},
          {"power", c.power_source},
          {"usd_per_unit", optional_json(c.dollars)}};
}

// "0.12x to 0.5x" over the workloads, or "0.12x" where they all agree.
std::string range_text(const std::vector<double>& ratios) {
  const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
  return *low == *high ? fmt::format("{:.3g}x", *low)
                       : fmt::format("{:.3g}x to {:.3g}x", *low, *high);
}

// The table's rows, their figures for --format json and the ratios the answer sums up.
struct Rows {
  std::string labels[2];
  TextTable table;
  nlohmann::json json = nlohmann::json::array();
  std::vector<std::string> from;
  std::vector<double> speeds, energies, costs;

  Rows(const std::string& first, const std::string& second)
      : labels{first, second},
        table({"workload", first, second, "speed", "energy per unit, " + first,
               "energy per unit, " + second, "energy", "cost per unit, " + first,
               "cost per unit, " + second, "cost"}) {}

  void add(const std::string& workload, double speed, const MachineCase& c1,
           const MachineCase& c2) {
    const std::string unit = unit_of_work(c1.result->headline->headline);
    const std::optional<double> energy = ratio(c1.joules, c2.joules),
                                cost = ratio(c1.dollars, c2.dollars);
    speeds.push_back(speed);
    if (energy) energies.push_back(*energy);
    if (cost) costs.push_back(*cost);
    const auto value = [](const MachineCase& c) {
      return fmt::format("{} ({})", value_text(*c.result->headline), c.result->key.backend);
    };
    table.add({workload, value(c1), value(c2), fmt::format("{:.3g}x", speed), energy_text(c1, unit),
               energy_text(c2, unit), ratio_text(energy), cost_text(c1, unit), cost_text(c2, unit),
               ratio_text(cost)});
    json.push_back({{"workload", workload},
                    {"metric", c1.result->headline->headline.metric},
                    {"unit_of_work", unit},
                    {"machines", {case_json(c1), case_json(c2)}},
                    {"speed_ratio", speed},
                    {"energy_ratio", optional_json(energy)},
                    {"cost_ratio", optional_json(cost)}});
    for (int m = 0; m < 2; ++m) {
      const ResultRecord& r = *(m ? c2 : c1).result;
      from.push_back(fmt::format("{}: {} {}: {}", labels[m], r.key.backend, workload,
                                 value_text(*r.headline)));
    }
  }

  // "... throughput 12x to 40x, energy per unit 0.05x to 0.2x, cost per unit 0.3x".
  std::string summed_up() const {
    std::string text = "throughput " + range_text(speeds);
    text += energies.empty()
                ? "; energy per unit needs a measured power or --watts for both"
                : fmt::format(", energy per unit {}{}", range_text(energies),
                              energies.size() < speeds.size() ? " (where both have a power)" : "");
    text += costs.empty() ? "; cost per unit needs --price-per-hour for both"
                          : fmt::format(", cost per unit {}", range_text(costs));
    return text;
  }
};

}  // namespace

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
  Answer a{"Buyer's table: throughput, energy and cost per unit of work, machine against machine",
           "",
           {}};
  if (machines.size() < 2) {
    a.answer =
        "not compared: one report; give a GPU machine's report and a CPU machine's, with their "
        "prices and powers where known (`trainbench summary gpu.json cpu.json --price-per-hour "
        "12,4 --watts 1000,400`)";
    return a;
  }
  if (!has_gpu(*machines[0].report) && has_gpu(*machines[1].report))
    std::swap(machines[0], machines[1]);
  const MachineReport &first = machines[0], &second = machines[1];
  const std::vector<ResultRecord> results[2] = {read_results(*first.report),
                                                read_results(*second.report)};
  const auto best_first = best_by_workload(results[0]), best_second = best_by_workload(results[1]);
  Rows rows(first.label, second.label);
  std::set<std::string> one_machine_only;
  for (const auto& [workload, r] : best_first)
    if (!best_second.count(workload)) one_machine_only.insert(workload);
  for (const auto& [workload, r] : best_second) {
    const auto other = best_first.find(workload);
    const std::optional<double> speed =
        other == best_first.end() ? std::nullopt : headline_ratio(*other->second, *r);
    if (speed)
      rows.add(workload, *speed, MachineCase(*other->second, first.costs),
               MachineCase(*r, second.costs));
    else
      one_machine_only.insert(workload);
  }
  a.data = {{"machines", nlohmann::json::array()}, {"rows", rows.json}};
  for (const MachineReport* m : {&first, &second})
    a.data["machines"].push_back({{"label", m->label},
                                  {"device", device_model(*m->report)},
                                  {"price_per_hour", optional_json(m->costs.price_per_hour)},
                                  {"watts", optional_json(m->costs.watts)}});
  const std::string names =
      fmt::format("{} ({}) over {} ({})", first.label, device_model(*first.report), second.label,
                  device_model(*second.report));
  const std::string only =
      one_machine_only.empty()
          ? ""
          : fmt::format("; {} workload(s) ran on one machine only or share no headline",
                        one_machine_only.size());
  if (rows.speeds.empty()) {
    a.answer = fmt::format("not compared: no workload in common, {}{}", names, only);
    return a;
  }
  a.answer =
      fmt::format("{} on {} workload(s): {}{}", names, rows.speeds.size(), rows.summed_up(), only);
  a.from = rows.from;
  a.tables.push_back(rows.table);
  a.titles.push_back(
      "Each machine's best backend per workload; ratios are the first machine's over the "
      "second's (speed above 1, energy and cost below 1: the first is better); energy from the "
      "power its counters measured over the case, else the power given:");
  return a;
}

}  // namespace tb
