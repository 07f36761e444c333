// Worker threads for the CPU backends: how many, and which logical CPU each one runs on.
// Both oneDNN and the shared CPU kernels run on the one OpenMP pool configured here.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "backends/host/host_info.h"
#include "backends/registry.h"

namespace tb::cpu {

struct ThreadPlacement {
  int threads = 0;
  std::vector<int> affinity;  // per OpenMP thread: the logical CPU it runs on (-1: unpinned)
  int cores_used = 0;         // physical cores among those CPUs (SMT siblings share FMA pipes)
  std::string note;           // how a cgroup CPU quota shaped the count; empty if none did
};

// Default: one thread per physical core in the process's affinity mask, each pinned to the
// first hardware thread of its core, and no more than the cgroup CPU quota rounded up (more
// threads than the quota's CPUs would be throttled in turn, not run at once). Throws
// UsageError for a thread count below 0 or above kMostThreadsPerCpu per CPU the process may use.
inline constexpr int kMostThreadsPerCpu = 4;
ThreadPlacement configure_threads(const BackendConfig& config, const HostInventory& host);

// The threads a cgroup quota of `cpus` CPUs runs at once: ceil(cpus); 0 for no quota.
int quota_thread_cap(double cpus);

// Physical cores the threads occupy: distinct cores of the pinned CPUs; with any thread
// unpinned, as many cores as threads, up to the cores allowed.
int physical_cores_used(const HostInventory& host, std::span<const int> affinity);

}  // namespace tb::cpu
