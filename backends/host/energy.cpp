#include "backends/host/energy.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace tb::cpu {
namespace {

namespace fs = std::filesystem;

// The first line of a small sysfs file, or nullopt with the system's reason in `why`.
std::optional<std::string> read_line(const fs::path& path, std::string* why) {
  errno = 0;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    *why = fmt::format("{}: {}", path.string(), errno ? std::strerror(errno) : "empty");
    return std::nullopt;
  }
  return line;
}

std::optional<std::uint64_t> read_count(const fs::path& path, std::string* why) {
  const std::optional<std::string> line = read_line(path, why);
  if (!line) return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(line->data(), line->data() + line->size(), value);
  if (error != std::errc() || end == line->data()) {
    *why = fmt::format("{}: not a count ('{}')", path.string(), *line);
    return std::nullopt;
  }
  return value;
}

// How deep a powercap zone's folder name is: 1 for a package ("intel-rapl:0"), 2 for one of
// its subzones ("intel-rapl:0:1"), 0 for any other name. Not std::regex: GCC 12 warns inside
// <regex> under the sanitizers' flags (as peak_table.cpp's name_matches notes).
int zone_depth(std::string_view entry) {
  constexpr std::string_view kPrefix = "intel-rapl";
  if (entry.substr(0, kPrefix.size()) != kPrefix) return 0;
  entry.remove_prefix(kPrefix.size());
  int depth = 0;
  while (!entry.empty()) {
    if (entry.front() != ':') return 0;
    entry.remove_prefix(1);
    std::size_t digits = 0;
    while (digits < entry.size() && std::isdigit(static_cast<unsigned char>(entry[digits])) != 0)
      ++digits;
    if (digits == 0) return 0;
    entry.remove_prefix(digits);
    ++depth;
  }
  return depth;
}

// The zone in `folder` if it is counted (a package, or a package's dram), else nullopt.
std::optional<std::string> counted_zone_name(const fs::path& folder) {
  const int depth = zone_depth(folder.filename().string());
  const bool is_package = depth == 1;
  if (depth != 1 && depth != 2) return std::nullopt;
  std::string why;
  const std::optional<std::string> name = read_line(folder / "name", &why);
  if (!name) return std::nullopt;
  if (is_package ? name->rfind("package", 0) == 0 : *name == "dram") return name;
  return std::nullopt;
}

}  // namespace

std::string powercap_root() {
  const char* root = std::getenv(kPowercapRootVariable);
  return root && *root ? root : "/sys/class/powercap";
}

EnergyCounters find_energy_counters(const std::string& root) {
  EnergyCounters out;
  std::error_code error;
  std::vector<fs::path> folders;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, error))
    folders.push_back(entry.path());
  if (error) {
    out.unavailable = fmt::format(
        "no powercap interface at {} ({}): the kernel has no energy driver for this CPU, or a "
        "virtual machine shows none",
        root, error.message());
    return out;
  }
  std::sort(folders.begin(), folders.end());
  std::string first_failure;
  for (const fs::path& folder : folders) {
    const std::optional<std::string> name = counted_zone_name(folder);
    if (!name) continue;
    std::string why;
    const std::optional<std::uint64_t> range = read_count(folder / "max_energy_range_uj", &why);
    if (range && *range == 0) why = fmt::format("{}: a range of 0", folder.string());
    if (range && *range > 0 && read_count(folder / "energy_uj", &why)) {
      out.zones.push_back({*name, (folder / "energy_uj").string(), *range});
      continue;
    }
    if (first_failure.empty()) first_failure = why;
  }
  if (!out.zones.empty()) return out;
  out.unavailable = first_failure.empty()
                        ? fmt::format("no package energy zone under {}", root)
                        : fmt::format("cannot read the energy counter: {}{}", first_failure,
                                      first_failure.find("Permission denied") != std::string::npos
                                          ? " (energy_uj is readable by root only since Linux 5.10)"
                                          : "");
  return out;
}

std::uint64_t counter_delta(std::uint64_t before, std::uint64_t after, std::uint64_t range_uj) {
  if (after >= before) return after - before;
  return range_uj > before ? range_uj - before + after : after;
}

EnergyWindow::EnergyWindow(EnergyCounters counters)
    : unavailable_(std::move(counters.unavailable)) {
  for (EnergyZone& zone : counters.zones) {
    Zone z;
    z.zone = std::move(zone);
    if (const std::optional<std::uint64_t> now = read_count(z.zone.counter, &z.failed))
      z.last_uj = *now;
    zones_.push_back(std::move(z));
  }
}

void EnergyWindow::read() {
  for (Zone& z : zones_) {
    if (!z.failed.empty()) continue;
    const std::optional<std::uint64_t> now = read_count(z.zone.counter, &z.failed);
    if (!now) continue;
    z.total_uj += counter_delta(z.last_uj, *now, z.zone.range_uj);
    z.last_uj = *now;
  }
}

nlohmann::json EnergyWindow::summarize(double seconds) const {
  nlohmann::json out = {{"source", "powercap"}, {"seconds", seconds}};
  if (zones_.empty()) {
    out["energy_unavailable"] = unavailable_;
    return out;
  }
  nlohmann::json zones = nlohmann::json::array();
  std::uint64_t total_uj = 0;
  for (const Zone& z : zones_) {
    if (!z.failed.empty()) {
      out["energy_unavailable"] = "a counter could not be read during the case: " + z.failed;
      return out;
    }
    zones.push_back({{"name", z.zone.name}, {"energy_j", z.total_uj * 1e-6}});
    total_uj += z.total_uj;
  }
  if (total_uj == 0) {
    out["energy_unavailable"] = fmt::format(
        "no energy counter moved over {:.2f} s (a virtual machine can show counters that never "
        "move)",
        seconds);
    return out;
  }
  out["zones"] = zones;
  out["energy_j"] = total_uj * 1e-6;
  if (seconds > 0) out["power_w"] = {{"mean", total_uj * 1e-6 / seconds}};
  return out;
}

}  // namespace tb::cpu
