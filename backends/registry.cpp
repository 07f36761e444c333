#include "backends/registry.h"

#include "backends/reference/reference_backend.h"
#include "backends/status.h"

namespace tb {

// Each backend folder's entry point, <name>_backend_entry(), for every backend CMake added
// (trainbench_add_backend in backends/CMakeLists.txt writes the list).
#define TRAINBENCH_BACKEND(name) BackendEntry name##_backend_entry();
#include "backends/backend_entries.inc"
#undef TRAINBENCH_BACKEND

const std::vector<BackendEntry>& backend_registry() {
#define TRAINBENCH_BACKEND(name) name##_backend_entry(),
  static const std::vector<BackendEntry> entries = {
#include "backends/backend_entries.inc"
  };
#undef TRAINBENCH_BACKEND
  return entries;
}

std::unique_ptr<Backend> make_reference_backend() {
  return cpu::make_host_reference_backend();
}

const BackendEntry* find_backend(std::string_view name) {
  for (const BackendEntry& entry : backend_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

PinPolicy parse_pin_policy(std::string_view name) {
  if (name == "cores") return PinPolicy::cores;
  if (name == "none") return PinPolicy::none;
  throw UsageError("unknown pinning policy '" + std::string(name) + "' (expected cores or none)");
}

std::string_view pin_policy_name(PinPolicy pin) {
  return pin == PinPolicy::cores ? "cores" : "none";
}

}  // namespace tb
