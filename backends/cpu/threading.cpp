#include "backends/cpu/threading.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <string>

#include "backends/status.h"

namespace tb::cpu {

ThreadPlacement configure_threads(const BackendConfig& config, const HostInventory& host) {
  if (config.threads < 0)
    throw UsageError("thread count must be 0 (one per core) or positive, got " +
                     std::to_string(config.threads));
  // One CPU per core first, then the cores' further hardware threads.
  std::vector<int> cpus;
  for (std::size_t sibling = 0;; ++sibling) {
    std::size_t before = cpus.size();
    for (const CpuCore& core : host.cores_allowed)
      if (sibling < core.logical_cpus.size()) cpus.push_back(core.logical_cpus[sibling]);
    if (cpus.size() == before) break;
  }
  const int cores = static_cast<int>(host.cores_allowed.size());
  ThreadPlacement placement;
  placement.threads = config.threads > 0 ? config.threads : (cores > 0 ? cores : 1);
  placement.affinity.assign(placement.threads, -1);

  omp_set_dynamic(0);
  omp_set_num_threads(placement.threads);
  const bool pin = config.pin == PinPolicy::cores && !cpus.empty();
#pragma omp parallel num_threads(placement.threads)
  {
    const int thread = omp_get_thread_num();
    if (pin) {
      const int cpu = cpus[thread % cpus.size()];
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    placement.affinity[thread] = pin ? sched_getcpu() : -1;
  }
  return placement;
}

}  // namespace tb::cpu
