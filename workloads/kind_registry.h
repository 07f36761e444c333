// A workload kind is one file: workloads/<kind>.cpp defines `KindEntry <kind>_kind_entry()`
// (its key tables, its factory and its expansions), and one line of workloads/CMakeLists.txt
// (`workload_kinds`) names it. CMake generates the list the registry iterates
// (kind_entries.inc, one TB_WORKLOAD_KIND(<kind>) per line, in `trainbench list` order); the
// registry's call of each entry function is also what keeps the kind's object in the binary.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "workloads/descriptor.h"
#include "workloads/workload.h"

namespace tb {

struct KindEntry {
  std::vector<WorkloadKind> kinds;  // key tables: one, or one per collective
  // Parses the descriptor by its kind's table (UsageError on bad input).
  std::unique_ptr<Workload> (*make)(const Descriptor& descriptor,
                                    const DeviceInfo& device) = nullptr;
  // Expansions before any backend (a collective's sizes= sweep); null: none.
  std::vector<Descriptor> (*expand)(const Descriptor& descriptor) = nullptr;
  // Expansions on the backend a case runs on (resnet50-train batch=sweep); null: none.
  std::vector<Descriptor> (*expand_for_backend)(const Descriptor& descriptor, Backend* backend,
                                                std::uint64_t available_bytes) = nullptr;
};

#define TB_WORKLOAD_KIND(id) KindEntry id##_kind_entry();
#include "workloads/kind_entries.inc"
#undef TB_WORKLOAD_KIND

// Every kind's entry, in `trainbench list` order.
const std::vector<KindEntry>& kind_entries();

}  // namespace tb
