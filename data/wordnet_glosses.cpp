#include "data/wordnet_glosses.h"

#include <charconv>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string_view>

#include <fmt/format.h>

#include "data/data_directory.h"

namespace tb {
namespace {

struct DataFile {
  const char* name;
  std::int64_t synsets;  // WordNet 3.0's
};
constexpr DataFile kDataFiles[] = {
    {"data.noun", 82115}, {"data.verb", 13767}, {"data.adj", 18156}, {"data.adv", 3621}};

Status read_glosses(const std::string& path, std::int64_t expected,
                    std::vector<std::string>* glosses) {
  std::ifstream file(path, std::ios::binary);
  // A missing dataset fails the case (as Fashion-MNIST's does): it is not a missing device.
  if (!file) return Status::InvalidArgument(fmt::format("cannot open {}", path));
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::int64_t synsets = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos)
      return Status::InvalidArgument(
          fmt::format("{}: the last line (byte {}) has no newline: truncated?", path, start));
    const std::string_view line(text.data() + start, end - start);
    const std::size_t line_start = start;
    start = end + 1;
    if (line.starts_with("  ")) continue;  // the licence header
    std::uint64_t offset = 0;
    const auto [after, error] = std::from_chars(line.data(), line.data() + line.size(), offset);
    const std::size_t bar = line.find(" | ");
    if (error != std::errc() || after - line.data() != 8 || offset != line_start ||
        bar == std::string_view::npos)
      return Status::InvalidArgument(
          fmt::format("{}: the line at byte {} is not a synset that starts with its own offset "
                      "and has a gloss after ' | '",
                      path, line_start));
    std::string_view gloss = line.substr(bar + 3);
    while (!gloss.empty() && gloss.back() == ' ') gloss.remove_suffix(1);
    glosses->emplace_back(gloss);
    ++synsets;
  }
  if (synsets != expected)
    return Status::InvalidArgument(
        fmt::format("{}: {} synsets, WordNet 3.0 has {}", path, synsets, expected));
  return Status::Ok();
}

}  // namespace

Status load_wordnet_glosses(const std::string& directory, std::vector<std::string>* glosses) {
  glosses->clear();
  for (const DataFile& data : kDataFiles) {
    const Status status = read_glosses(directory + "/" + data.name, data.synsets, glosses);
    if (!status.ok())
      return Status(status.code(),
                    fmt::format("WordNet: {} (Debian package wordnet-base installs it in {})",
                                status.message(), kWordNetDirectory));
  }
  return Status::Ok();
}

std::string wordnet_directory() {
  return data_directory("TRAINBENCH_WORDNET_DIR", kWordNetDirectory);
}

}  // namespace tb
