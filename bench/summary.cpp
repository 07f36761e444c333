// `trainbench summary`: prints reports/summary.h's answers as text, Markdown or JSON.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "bench/report_commands.h"
#include "reports/buyers_table.h"
#include "reports/summary.h"

namespace tb {
namespace {

// A table's lines under an answer, indented four spaces.
std::string indented(const TextTable& table) {
  std::string out;
  const std::string text = table.render(TableFormat::table);
  for (std::size_t start = 0, end; start < text.size(); start = end + 1) {
    end = text.find('\n', start);
    out += "    " + text.substr(start, end - start + 1);
  }
  return out;
}

}  // namespace

int summary_command(const SummaryOptions& options) {
  const std::vector<Costs> costs = load_costs(options.reports, options.costs);
  std::vector<ReportFile> files;
  for (std::size_t i = 0; i < options.reports.size(); ++i)
    files.push_back({options.reports[i], read_input_report(options.reports[i]), costs[i]});
  const std::vector<HostReports> grouped = group_by_machine(files);
  std::vector<MachineReport> machines;
  for (const HostReports& m : grouped) machines.push_back({m.label, &m.report, m.costs});
  const std::vector<Answer> answers = machine_answers(machines);
  std::string text;
  if (options.format == TableFormat::json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Answer& a : answers) {
      out.push_back({{"question", a.question}, {"answer", a.answer}, {"from", a.from}});
      if (!a.data.is_null()) out.back()[a.data_key] = a.data;
    }
    text = out.dump(2) + "\n";
  } else {
    const bool markdown = options.format == TableFormat::markdown;
    for (const Answer& a : answers) {
      text += fmt::format(fmt::runtime(markdown ? "**{}**: {}\n" : "{}:\n  {}\n"), a.question,
                          a.answer);
      for (const std::string& from : a.from)
        text += fmt::format(fmt::runtime(markdown ? "- from {}\n" : "    from {}\n"), from);
      for (std::size_t i = 0; i < a.tables.size(); ++i)
        text += markdown ? fmt::format("\n{}\n\n{}", a.titles[i],
                                       a.tables[i].render(TableFormat::markdown))
                         : fmt::format("  {}\n{}", a.titles[i], indented(a.tables[i]));
      text += "\n";
    }
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace tb
