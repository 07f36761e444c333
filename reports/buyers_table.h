// Several machines' reports read together (`trainbench summary bench/results/*/*.json`): the
// answers of summary.h on their results as one, and the buyer's table. The table pairs the
// machines by what a case computes, not by its descriptor (reports/case_family.h): each machine
// at the size its own suite runs, every pair saying its sizes. Per family it gives each machine's
// figure (every backend for training, the best for the rest), the speed over a baseline machine,
// the step time at a stated global batch and the time-to-train of training cases, and energy and
// cost per unit of work; then what it could not answer, each with the command that would.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/summary.h"

namespace tb {

// One machine: its reports read as one, a label and its price and power if given.
struct MachineReport {
  std::string label;
  const nlohmann::json* report = nullptr;
  Costs costs;
};

// A report file as given, with the price and power given for it.
struct ReportFile {
  std::string path;
  nlohmann::json report;
  Costs costs;
};

// A machine's reports merged: every result (a collective's `world_size` kept with it), the
// backends of all, the host and tool of the first.
struct HostReports {
  std::string label;
  nlohmann::json report;
  Costs costs;
  std::vector<std::string> files;
};

// Reports of one host (its name, CPU model, logical CPUs, memory and GPU models: a PyTorch peer's
// report on that host included) are one machine's. A machine is labelled by the folder of its
// reports where every report is in it and no other machine's is (bench/results/h200/ -> "h200"),
// else by its first report's file name. Throws UsageError for a report given twice, or where one
// machine's reports are given different prices or powers.
std::vector<HostReports> group_by_machine(const std::vector<ReportFile>& files);

// One report of every machine's results, for summary_answers: a backend that more than one
// machine ran is named with the machine's label ("cpu-onednn on cpu.json"), so that no answer
// pairs one machine's result with another's as if they were one backend's.
nlohmann::json merged_report(const std::vector<MachineReport>& machines);

// summary's answers for one machine's report, or for several read as one (merged_report), then
// the buyer's table: what `trainbench summary` prints and the report page opens with.
std::vector<Answer> machine_answers(const std::vector<MachineReport>& machines);

// The buyer's table (see the top of this file). Machines with a GPU come first, the others after
// them in the order given; the baseline of the speed ratios is the last machine (one without a
// GPU where there is one). With one machine the
// answer says how to ask for a comparison, and the table still lists its figures.
Answer buyers_table_answer(std::vector<MachineReport> machines);

}  // namespace tb
