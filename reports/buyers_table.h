// Two machines' reports read together (`trainbench summary gpu.json cpu.json`): the answers of
// summary.h on their results as one, and the buyer's table, workload by workload: throughput
// ratio, energy per unit of work and cost per unit of work.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/summary.h"

namespace tb {

// One machine: its report, a label (the report's file name) and its price and power if given.
struct MachineReport {
  std::string label;
  const nlohmann::json* report = nullptr;
  Costs costs;
};

// One report of every machine's results, for summary_answers: a backend that more than one
// machine ran is named with the machine's label ("cpu-onednn on cpu.json"), so that no answer
// pairs one machine's result with another's as if they were one backend's.
nlohmann::json merged_report(const std::vector<MachineReport>& machines);

// summary's answers for one machine's report, or for several read as one (merged_report), then
// the buyer's table: what `trainbench summary` prints and the report page opens with.
std::vector<Answer> machine_answers(const std::vector<MachineReport>& machines);

// The buyer's table: per workload that both machines ran, each one's best result, the
// throughput ratio (first over second), energy per unit of work (the power its energy counters
// measured over the case, else the --watts given, said which) and cost per unit of work
// (--price-per-hour). The machine with a GPU comes first where only one has one. With fewer than
// two machines the answer says how to ask.
Answer buyers_table_answer(std::vector<MachineReport> machines);

}  // namespace tb
