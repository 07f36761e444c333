#include "backends/registry.h"

#include "backends/status.h"

#ifdef TRAINBENCH_HAVE_ONEDNN
#include "backends/onednn/onednn_backend.h"
#endif
#ifdef TRAINBENCH_HAVE_OPENBLAS
#include "backends/openblas/openblas_backend.h"
#endif
#ifdef TRAINBENCH_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace tb {

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> entries = {
#ifdef TRAINBENCH_HAVE_ONEDNN
      onednn_backend_entry(),
#endif
#ifdef TRAINBENCH_HAVE_OPENBLAS
      openblas_backend_entry(),
#endif
#ifdef TRAINBENCH_HAVE_CUDA
      cuda_backend_entry(),
#endif
  };
  return entries;
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
