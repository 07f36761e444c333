#include "workloads/keys.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "workloads/descriptor.h"

namespace tb {

const KeySpec* WorkloadKind::find(std::string_view key) const {
  for (const KeySpec& spec : keys)
    if (spec.name == key) return &spec;
  return nullptr;
}

const KeySpec& WorkloadKind::at(std::string_view key) const {
  if (const KeySpec* spec = find(key)) return *spec;
  throw std::logic_error(fmt::format("workload '{}' has no key '{}' in its table", name, key));
}

KeySpec choice_key(std::string name, std::string fallback, std::vector<std::string> choices,
                   std::string help) {
  return {.name = std::move(name),
          .type = KeyType::choice,
          .fallback = std::move(fallback),
          .choices = std::move(choices),
          .help = std::move(help)};
}

KeySpec integer_key(std::string name, std::string fallback, std::string help, std::int64_t min,
                    std::int64_t max) {
  return {.name = std::move(name),
          .type = KeyType::integer,
          .fallback = std::move(fallback),
          .min = min,
          .max = max,
          .help = std::move(help)};
}

KeySpec required_integer_key(std::string name, std::string help) {
  return {
      .name = std::move(name), .type = KeyType::integer, .required = true, .help = std::move(help)};
}

KeySpec integer_like_key(std::string name, std::string other, std::string help, std::int64_t min) {
  return {.name = std::move(name),
          .type = KeyType::integer,
          .min = min,
          .same_as = std::move(other),
          .help = std::move(help)};
}

KeySpec number_key(std::string name, std::string fallback, std::string help, NumberRange range) {
  return {.name = std::move(name),
          .type = KeyType::number,
          .fallback = std::move(fallback),
          .range = range,
          .help = std::move(help)};
}

KeySpec omitted_at_default(KeySpec spec) {
  spec.omit_default = true;
  return spec;
}

KeySpec label_key() {
  return {.name = "name", .omit_default = true, .help = "a label, kept in the descriptor"};
}

KeySpec shapes_key() {
  return {.name = "shapes",
          .type = KeyType::shape_list,
          .help = "one case per line of the list, the other keys merged in"};
}

Descriptor canonical_descriptor(const WorkloadKind& kind,
                                const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) kind.at(key);
  Descriptor descriptor(kind.name);
  for (const KeySpec& spec : kind.keys) {
    const auto value = values.find(spec.name);
    if (value == values.end() || (spec.omit_default && value->second == spec.fallback)) continue;
    descriptor.set(spec.name, value->second);
  }
  return descriptor;
}

namespace {

std::string quoted(const std::string& text) {
  return fmt::format("`{}`", text);
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::vector<std::string> cells;
  for (const std::string& item : items) cells.push_back(quoted(item));
  return fmt::format("{}", fmt::join(cells, ", "));
}

std::string type_words(const KeySpec& spec) {
  std::string words;
  switch (spec.type) {
    case KeyType::integer:
      words = spec.max == std::numeric_limits<std::int64_t>::max()
                  ? fmt::format("integer >= {}", spec.min)
                  : fmt::format("integer from {} to {}", spec.min, spec.max);
      break;
    case KeyType::number:
      words = spec.range.words().empty() ? "number" : "number " + spec.range.words();
      break;
    case KeyType::text:
      words = "text";
      break;
    case KeyType::choice:
      return quoted_list(spec.choices);
    case KeyType::shape_list:
      words = "a shape list (workloads/shapes)";
      break;
  }
  return spec.also.empty() ? words : fmt::format("{} or {}", words, spec.also);
}

// A table cell: no '|' (it would end the cell), spaces collapsed.
std::string normalized(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == ' ' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::vector<std::string> cells_of(std::string_view line) {
  std::vector<std::string> cells;
  std::string cell;
  for (std::size_t i = 1; i < line.size(); ++i) {  // line[0] is the opening '|'
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (line[i] == '|') {
      cells.push_back(normalized(cell));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  if (!normalized(cell).empty()) cells.push_back(normalized(cell));
  return cells;
}

std::string escaped(const std::string& cell) {
  std::string out;
  for (char c : cell) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string unquoted(std::string text) {
  if (text.size() >= 2 && text.front() == '`' && text.back() == '`')
    text = text.substr(1, text.size() - 2);
  return text;
}

}  // namespace

KeyRow key_row(const KeySpec& spec) {
  std::string fallback = spec.required            ? "required"
                         : !spec.same_as.empty()  ? fmt::format("same as {}", quoted(spec.same_as))
                         : !spec.derived.empty()  ? spec.derived
                         : !spec.fallback.empty() ? quoted(spec.fallback)
                                                  : "none";
  return {quoted(spec.name), fallback, type_words(spec), spec.help};
}

std::string key_usage(const WorkloadKind& kind) {
  std::vector<std::string> words;
  for (const KeySpec& spec : kind.keys) {
    std::string value = spec.type == KeyType::choice
                            ? fmt::format("{}", fmt::join(spec.choices, "|"))
                        : !spec.fallback.empty()        ? spec.fallback
                        : spec.type == KeyType::integer ? "N"
                        : spec.type == KeyType::number  ? "X"
                                                        : "LIST";
    if (spec.type == KeyType::text) value = "LABEL";
    if (!spec.also.empty()) value = fmt::format("{}|{}", value, unquoted(spec.also));
    const std::string word = fmt::format("{}={}", spec.name, value);
    words.push_back(spec.required ? word : fmt::format("[{}]", word));
  }
  return fmt::format("{}", fmt::join(words, " "));
}

std::string key_tables_markdown(const std::vector<WorkloadKind>& kinds) {
  std::string out;
  for (const WorkloadKind& kind : kinds) {
    out += fmt::format("## {}\n\n{}\n\n", kind.name, kind.summary);
    out += "| key | default | choices | meaning |\n|-----|---------|---------|---------|\n";
    for (const KeySpec& spec : kind.keys) {
      const KeyRow row = key_row(spec);
      out += fmt::format("| {} | {} | {} | {} |\n", escaped(row.key), escaped(row.fallback),
                         escaped(row.choices), escaped(row.meaning));
    }
    out += "\n";
  }
  return out;
}

std::vector<std::string> key_table_differences(const std::vector<WorkloadKind>& kinds,
                                               std::string_view markdown) {
  // The rows of the first table under each "## <heading>".
  std::map<std::string, std::vector<std::vector<std::string>>> tables;
  std::istringstream lines{std::string(markdown)};
  std::string heading;
  bool in_table = false, table_done = false;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.starts_with("## ")) {
      heading = unquoted(normalized(line.substr(3)));
      in_table = table_done = false;
      continue;
    }
    const bool row = line.starts_with("|");
    if (!row && in_table) table_done = true;
    if (!row || heading.empty() || table_done) continue;
    const std::vector<std::string> cells = cells_of(line);
    if (!in_table) {  // the header row: a key table's starts with "key"
      in_table = true;
      table_done = cells.empty() || cells[0] != "key";
      continue;
    }
    const bool rule = !cells.empty() && cells[0].find_first_not_of("-: ") == std::string::npos;
    if (!rule && !cells.empty()) tables[heading].push_back(cells);
  }

  std::vector<std::string> differences;
  const char* columns[] = {"key", "default", "choices", "meaning"};
  for (const WorkloadKind& kind : kinds) {
    const auto table = tables.find(kind.name);
    if (table == tables.end()) {
      differences.push_back(fmt::format("{}: no key table under '## {}'", kind.name, kind.name));
      continue;
    }
    for (const KeySpec& spec : kind.keys) {
      const KeyRow code = key_row(spec);
      const auto doc = std::find_if(table->second.begin(), table->second.end(),
                                    [&](auto& cells) { return unquoted(cells[0]) == spec.name; });
      if (doc == table->second.end()) {
        differences.push_back(
            fmt::format("{}: key '{}' is missing from the docs", kind.name, spec.name));
        continue;
      }
      const std::string wanted[] = {code.key, normalized(code.fallback), normalized(code.choices),
                                    normalized(code.meaning)};
      for (std::size_t column = 1; column < 4; ++column) {
        const std::string got = column < doc->size() ? (*doc)[column] : "";
        if (got != wanted[column])
          differences.push_back(
              fmt::format("{}: key '{}': {} is '{}' in the docs, '{}' in the code", kind.name,
                          spec.name, columns[column], got, wanted[column]));
      }
    }
    for (const auto& cells : table->second)
      if (!kind.find(unquoted(cells[0])))
        differences.push_back(fmt::format("{}: key '{}' is in the docs but not in the code",
                                          kind.name, unquoted(cells[0])));
  }
  for (const auto& table : tables) {
    const std::string& name =
        table.first;  // a lambda may not capture a structured binding (clang 14)
    if (std::none_of(kinds.begin(), kinds.end(), [&](auto& kind) { return kind.name == name; }))
      differences.push_back(
          fmt::format("'## {}': a table for a workload kind the code lacks", name));
  }
  return differences;
}

}  // namespace tb
