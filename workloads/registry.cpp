#include "workloads/registry.h"

#include <sstream>

#include <fmt/format.h>

#include "backends/host/host_info.h"
#include "backends/status.h"
#include "workloads/embedded_files.h"
#include "workloads/kind_registry.h"

namespace tb {

const std::vector<KindEntry>& kind_entries() {
  static const std::vector<KindEntry> entries = {
#define TB_WORKLOAD_KIND(id) id##_kind_entry(),
#include "workloads/kind_entries.inc"
#undef TB_WORKLOAD_KIND
  };
  return entries;
}

const std::vector<WorkloadKind>& workload_kinds() {
  static const std::vector<WorkloadKind> kinds = [] {
    std::vector<WorkloadKind> all;
    for (const KindEntry& entry : kind_entries())
      all.insert(all.end(), entry.kinds.begin(), entry.kinds.end());
    return all;
  }();
  return kinds;
}

namespace {

// The entry of the kind named `name`, or null.
const KindEntry* find_kind_entry(std::string_view name) {
  for (const KindEntry& entry : kind_entries())
    for (const WorkloadKind& kind : entry.kinds)
      if (kind.name == name) return &entry;
  return nullptr;
}

}  // namespace

const WorkloadKind* find_workload_kind(std::string_view name) {
  for (const WorkloadKind& kind : workload_kinds())
    if (kind.name == name) return &kind;
  return nullptr;
}

std::unique_ptr<Workload> create_workload(const Descriptor& descriptor, const DeviceInfo& device) {
  const std::string& kind = descriptor.kind();
  for (const char* list : {"shapes", "sizes"})
    if (descriptor.has(list))
      throw UsageError(
          fmt::format("'{}': expand {}= before creating a workload", descriptor.to_string(), list));
  if (const KindEntry* entry = find_kind_entry(kind)) return entry->make(descriptor, device);
  std::vector<std::string> names;
  for (const WorkloadKind& known : workload_kinds()) names.push_back(known.name);
  throw UsageError(fmt::format("unknown workload '{}' (known: {})", kind, fmt::join(names, ", ")));
}

std::uint64_t memory_for_expansion(const DeviceInfo& device) {
  return device.kind == "cpu" ? cpu::memory_available_bytes() : device.memory_bytes;
}

std::vector<Descriptor> expand_for_backend(const Descriptor& descriptor, Backend* backend,
                                           std::uint64_t available_bytes) {
  const KindEntry* entry = find_kind_entry(descriptor.kind());
  if (!entry || !entry->expand_for_backend) return {descriptor};
  return entry->expand_for_backend(descriptor, backend, available_bytes);
}

std::vector<std::string> content_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(line);
  }
  return lines;
}

std::vector<Descriptor> expand_shapes(const Descriptor& descriptor) {
  const auto list = descriptor.get("shapes");
  if (!list) {
    const KindEntry* entry = find_kind_entry(descriptor.kind());
    return entry && entry->expand ? entry->expand(descriptor) : std::vector{descriptor};
  }
  const auto text = embedded_file(fmt::format("shapes/{}.txt", *list));
  if (!text)
    throw UsageError(fmt::format("unknown shape list '{}' in '{}' (known: {})", *list,
                                 descriptor.to_string(), fmt::join(shape_list_names(), ", ")));
  std::vector<Descriptor> expanded;
  for (const std::string& line : content_lines(*text)) {
    Descriptor shape = Descriptor::parse(line);
    if (shape.kind() != descriptor.kind())
      throw UsageError(fmt::format("shape list '{}' holds {} shapes, not {}", *list, shape.kind(),
                                   descriptor.kind()));
    for (const auto& [key, value] : descriptor.params())
      if (key != "shapes") shape.set(key, value);
    expanded.push_back(std::move(shape));
  }
  return expanded;
}

std::vector<Descriptor> load_suite(std::string_view name) {
  const auto text = embedded_file(fmt::format("suites/{}.txt", name));
  if (!text)
    throw UsageError(
        fmt::format("unknown suite '{}' (known: {})", name, fmt::join(suite_names(), ", ")));
  std::vector<Descriptor> cases;
  for (const std::string& line : content_lines(*text))
    for (Descriptor& expanded : expand_shapes(Descriptor::parse(line)))
      cases.push_back(std::move(expanded));
  return cases;
}

namespace {
std::vector<std::string> names_under(std::string_view folder) {
  std::vector<std::string> names;
  for (const EmbeddedFile& file : embedded_files()) {
    std::string_view path = file.path;
    if (path.starts_with(folder) && path.ends_with(".txt"))
      names.emplace_back(path.substr(folder.size(), path.size() - folder.size() - 4));
  }
  return names;
}
}  // namespace

std::vector<std::string> suite_names() {
  return names_under("suites/");
}
std::vector<std::string> shape_list_names() {
  return names_under("shapes/");
}

}  // namespace tb
