// Text output of what reads reports (compare, check, summary...): aligned tables, Markdown, CSV.
#pragma once

#include <string>
#include <vector>

namespace tb {

enum class TableFormat { table, markdown, csv, json };

// Rows of text cells, printed as an aligned table, Markdown or CSV.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  std::string render(TableFormat format) const;

 private:
  std::vector<const std::vector<std::string>*> all_rows() const;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Three significant digits in s, ms or us.
std::string format_seconds(double seconds);

}  // namespace tb
