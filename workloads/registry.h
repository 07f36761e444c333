// Workload kinds by name, shape-list expansion and suites. Suites and shape lists are text
// files under workloads/suites and workloads/shapes, compiled into the binary.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "workloads/descriptor.h"
#include "workloads/workload.h"

namespace tb {

// Every kind's key table (workloads/keys.h), in the order `trainbench list` shows them.
const std::vector<WorkloadKind>& workload_kinds();
// The kind named `name`, or null.
const WorkloadKind* find_workload_kind(std::string_view name);

// Throws UsageError for an unknown kind or a descriptor the kind rejects.
std::unique_ptr<Workload> create_workload(const Descriptor& descriptor, const DeviceInfo& device);

// `shapes=NAME` stands for every line of workloads/shapes/NAME.txt, each merged with the
// descriptor's other keys (which win). A collective's `sizes=` sweep expands into one case per
// size (expand_collective_sizes). A descriptor with neither expands to itself.
std::vector<Descriptor> expand_shapes(const Descriptor& descriptor);

// Expansions that depend on the backend a case runs on (resnet50-train batch=sweep: the
// largest batch that fits in `available_bytes`). `backend` is null for a backend that is not
// usable here. Across ranks the caller passes the least of the ranks' memory, so that every
// rank expands to the same cases.
std::vector<Descriptor> expand_for_backend(const Descriptor& descriptor, Backend* backend,
                                           std::uint64_t available_bytes);
// The memory such an expansion may plan for on `device`: free host memory for a CPU, the
// device's memory otherwise.
std::uint64_t memory_for_expansion(const DeviceInfo& device);

// The descriptors of workloads/suites/NAME.txt, shapes expanded. Throws UsageError.
std::vector<Descriptor> load_suite(std::string_view name);
std::vector<std::string> suite_names();
std::vector<std::string> shape_list_names();

// Lines of a text file: '#' starts a comment, blank lines are skipped.
std::vector<std::string> content_lines(std::string_view text);

}  // namespace tb
