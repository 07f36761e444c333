// `trainbench summary`: prints reports/summary.h's answers as text, Markdown or JSON.
#include <cstdio>
#include <filesystem>
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
  std::vector<nlohmann::json> reports;
  for (const std::string& path : options.reports) reports.push_back(read_input_report(path));
  const std::vector<Costs> costs = load_costs(options.reports, options.costs);
  std::vector<MachineReport> machines;
  for (std::size_t i = 0; i < reports.size(); ++i)
    machines.push_back(
        {std::filesystem::path(options.reports[i]).filename().string(), &reports[i], costs[i]});
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
