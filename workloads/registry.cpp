#include "workloads/registry.h"

#include <sstream>

#include <fmt/format.h>

#include "backends/cpu/host_info.h"
#include "backends/status.h"
#include "workloads/embedded_files.h"
#include "workloads/kinds.h"

namespace tb {

const std::vector<WorkloadKind>& workload_kinds() {
  static const std::vector<WorkloadKind> kinds = {peak_kind(),
                                                  stream_kind(),
                                                  transfer_kind(),
                                                  gemm_kind(),
                                                  conv_kind(),
                                                  resnet50_train_kind(),
                                                  bert_train_kind(),
                                                  ttt_fashion_mnist_kind(),
                                                  ttt_mlm_kind(),
                                                  collective_kind("allreduce"),
                                                  collective_kind("reduce_scatter"),
                                                  collective_kind("allgather"),
                                                  collective_kind("broadcast")};
  return kinds;
}

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
  if (kind == "gemm") return make_gemm(descriptor);
  if (kind == "conv") return make_conv(descriptor);
  if (kind == "stream") return make_stream(descriptor, device);
  if (kind == "peak") return make_peak(descriptor);
  if (kind == "transfer") return make_transfer(descriptor);
  if (kind == "resnet50-train") return make_resnet50_train(descriptor);
  if (kind == "bert-train") return make_bert_train(descriptor);
  if (kind == "ttt-fashion-mnist") return make_ttt_fashion_mnist(descriptor);
  if (kind == "ttt-mlm") return make_ttt_mlm(descriptor);
  if (is_collective(kind)) return make_collective(descriptor);
  std::vector<std::string> names;
  for (const WorkloadKind& known : workload_kinds()) names.push_back(known.name);
  throw UsageError(fmt::format("unknown workload '{}' (known: {})", kind, fmt::join(names, ", ")));
}

std::uint64_t memory_for_expansion(const DeviceInfo& device) {
  return device.kind == "cpu" ? cpu::memory_available_bytes() : device.memory_bytes;
}

std::vector<Descriptor> expand_for_backend(const Descriptor& descriptor, Backend* backend,
                                           std::uint64_t available_bytes) {
  if (descriptor.kind() != "resnet50-train") return {descriptor};
  return expand_resnet50_sweep(descriptor, backend, available_bytes);
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
  if (!list) return expand_collective_sizes(descriptor);
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
