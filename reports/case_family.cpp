#include "reports/case_family.h"

#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "backends/status.h"
#include "workloads/descriptor.h"
#include "workloads/registry.h"

namespace tb {
namespace {

bool is_collective(const std::string& kind) {
  return kind == "allreduce" || kind == "reduce_scatter" || kind == "allgather" ||
         kind == "broadcast";
}

CaseClass class_of(const std::string& kind) {
  if (kind.ends_with("-train")) return CaseClass::training;
  if (kind.starts_with("ttt-")) return CaseClass::time_to_train;
  if (kind == "stream") return CaseClass::bandwidth;
  if (kind == "transfer") return CaseClass::transfer;
  if (kind == "peak") return CaseClass::peak;
  if (is_collective(kind)) return CaseClass::collective;
  return CaseClass::product;
}

// The keys that size a case of `kind` rather than say what it computes. A GEMM's m, n and k
// size it only when they are equal (the square family); any other shape is its own family.
std::vector<std::string> sizing_keys(const std::string& kind,
                                     const std::map<std::string, std::string>& values) {
  switch (class_of(kind)) {
    case CaseClass::training:
      return {"batch", "sweep_largest"};
    case CaseClass::time_to_train:
      return {"runs"};
    case CaseClass::bandwidth:
      return {"n"};
    case CaseClass::transfer:
      return {"bytes"};
    case CaseClass::peak:
      return {"iterations"};
    case CaseClass::collective:
      return {"bytes", "sizes"};
    case CaseClass::product:
      if (kind == "conv") return {"mb"};
      if (values.at("m") == values.at("n") && values.at("n") == values.at("k"))
        return {"m", "n", "k"};
      return {};
  }
  return {};
}

}  // namespace

CaseFamily case_family(std::string_view workload, int ranks) {
  const Descriptor d = Descriptor::parse(workload);
  const WorkloadKind* kind = find_workload_kind(d.kind());
  if (!kind)
    throw UsageError(fmt::format("unknown workload kind '{}' in '{}'", d.kind(), workload));
  // Every key's value, its default where the descriptor leaves it out; "" where the workload
  // works the default out.
  std::map<std::string, std::string> values, fallbacks;
  for (const KeySpec& spec : kind->keys) fallbacks[spec.name] = spec.fallback;
  for (const KeySpec& spec : kind->keys)
    if (!spec.same_as.empty())
      fallbacks[spec.name] = d.get(spec.same_as).value_or(fallbacks[spec.same_as]);
  for (const KeySpec& spec : kind->keys)
    values[spec.name] = d.get(spec.name).value_or(fallbacks[spec.name]);

  CaseFamily family;
  family.kind = class_of(d.kind());
  const std::vector<std::string> sizing = sizing_keys(d.kind(), values);
  family.key = family.label = d.kind();
  std::vector<std::string> size;
  for (const KeySpec& spec : kind->keys) {
    const std::string& value = values[spec.name];
    if (std::find(sizing.begin(), sizing.end(), spec.name) != sizing.end()) {
      // The first sizing key always (a time-to-train's runs only off its default), the others
      // where off their defaults (sweep_largest=0).
      const bool first = size.empty() && family.kind != CaseClass::time_to_train;
      if (!value.empty() && (first || value != fallbacks[spec.name]))
        size.push_back(spec.name + "=" + value);
      continue;
    }
    if (!spec.derived.empty() || spec.name == "name" || spec.name == "shapes" || value.empty())
      continue;
    family.key += " " + spec.name + "=" + value;
    // The label shows what differs from the kind's defaults, and always the dtype, STREAM's
    // kernel and a copy's direction, without which a family's figure reads as something else.
    const bool always = spec.name == "dtype" || spec.name == "op" || spec.name == "dir";
    if (always || value != fallbacks[spec.name]) family.label += " " + spec.name + "=" + value;
  }
  if (d.kind() == "gemm" && sizing.size() == 3) {
    family.key += " square";
    family.label += " (square)";
    family.size = "m=n=k=" + values["m"];
  } else {
    family.size = fmt::format("{}", fmt::join(size, " "));
  }
  if (family.kind == CaseClass::collective) {
    family.key += fmt::format(" ranks={}", ranks);
    family.label += fmt::format(" at {} rank(s)", ranks);
  }
  return family;
}

}  // namespace tb
