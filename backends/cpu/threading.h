// Worker threads for the CPU backends: how many, and which logical CPU each one runs on.
// Both oneDNN and the shared CPU kernels run on the one OpenMP pool configured here.
#pragma once

#include <vector>

#include "backends/cpu/host_info.h"
#include "backends/registry.h"

namespace tb::cpu {

struct ThreadPlacement {
  int threads = 0;
  std::vector<int> affinity;  // per OpenMP thread: the logical CPU it runs on (-1: unpinned)
};

// Default: one thread per physical core in the process's affinity mask, each pinned to the
// first hardware thread of its core. Throws UsageError for a thread count below 0.
ThreadPlacement configure_threads(const BackendConfig& config, const HostInventory& host);

}  // namespace tb::cpu
