#include "reports/text_table.h"

#include <algorithm>

#include <fmt/format.h>

namespace tb {
namespace {

std::string csv_cell(const std::string& cell) {
  if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (char c : cell) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

std::string TextTable::render(TableFormat format) const {
  std::string out;
  if (format == TableFormat::csv) {
    for (const auto* row : all_rows()) {
      std::vector<std::string> cells;
      for (const std::string& cell : *row) cells.push_back(csv_cell(cell));
      out += fmt::format("{}\n", fmt::join(cells, ","));
    }
    return out;
  }
  if (format == TableFormat::markdown) {
    out += fmt::format("| {} |\n|{}|\n", fmt::join(header_, " | "),
                       fmt::join(std::vector<std::string>(header_.size(), "---"), "|"));
    for (const auto& row : rows_) out += fmt::format("| {} |\n", fmt::join(row, " | "));
    return out;
  }
  std::vector<std::size_t> widths(header_.size(), 0);
  for (const auto* row : all_rows())
    for (std::size_t i = 0; i < row->size(); ++i) widths[i] = std::max(widths[i], (*row)[i].size());
  for (const auto* row : all_rows()) {
    std::string line;
    for (std::size_t i = 0; i < row->size(); ++i)
      line += fmt::format("{:<{}}  ", (*row)[i], widths[i]);
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

std::vector<const std::vector<std::string>*> TextTable::all_rows() const {
  std::vector<const std::vector<std::string>*> rows = {&header_};
  for (const auto& row : rows_) rows.push_back(&row);
  return rows;
}

std::string format_seconds(double seconds) {
  if (seconds >= 1) return fmt::format("{:.3g} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.3g} ms", seconds * 1e3);
  return fmt::format("{:.3g} us", seconds * 1e6);
}

}  // namespace tb
