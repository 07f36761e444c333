#include "backends/host/threading.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include <fmt/format.h>

#include "backends/status.h"

namespace tb::cpu {
namespace {

// One CPU per core first, then the cores' further hardware threads.
std::vector<int> cpus_in_pinning_order(const HostInventory& host) {
  std::vector<int> cpus;
  for (std::size_t sibling = 0;; ++sibling) {
    const std::size_t before = cpus.size();
    for (const CpuCore& core : host.cores_allowed)
      if (sibling < core.logical_cpus.size()) cpus.push_back(core.logical_cpus[sibling]);
    if (cpus.size() == before) break;
  }
  return cpus;
}

// The thread count, and what the report should say about the quota's part in it.
int choose_thread_count(const BackendConfig& config, const HostInventory& host, std::string* note) {
  const int cores = std::max(static_cast<int>(host.cores_allowed.size()), 1);
  const int cap = quota_thread_cap(host.cpu_quota.cpus);
  if (config.threads > 0) {
    if (cap > 0 && config.threads > host.cpu_quota.cpus)
      *note = fmt::format(
          "{} threads requested over a cgroup CPU quota of {:.2f} CPUs ({}): the kernel "
          "throttles them",
          config.threads, host.cpu_quota.cpus, host.cpu_quota.source);
    return config.threads;
  }
  if (cap > 0 && cap < cores) {
    *note = fmt::format(
        "threads capped at {} (one per core would be {}) by the cgroup CPU quota of {:.2f} CPUs "
        "({})",
        cap, cores, host.cpu_quota.cpus, host.cpu_quota.source);
    return cap;
  }
  return cores;
}

}  // namespace

int quota_thread_cap(double cpus) {
  if (cpus <= 0) return 0;
  // A quota computed as quota / period may sit a hair above a whole number.
  return std::max(1, static_cast<int>(std::ceil(cpus - 1e-6)));
}

int physical_cores_used(const HostInventory& host, std::span<const int> affinity) {
  const int allowed = static_cast<int>(host.cores_allowed.size());
  if (std::find(affinity.begin(), affinity.end(), -1) != affinity.end())
    return std::min(static_cast<int>(affinity.size()), std::max(allowed, 1));
  std::set<std::size_t> cores;
  for (int cpu : affinity)
    for (std::size_t core = 0; core < host.cores_allowed.size(); ++core) {
      const std::vector<int>& cpus = host.cores_allowed[core].logical_cpus;
      if (std::find(cpus.begin(), cpus.end(), cpu) != cpus.end()) cores.insert(core);
    }
  return static_cast<int>(cores.size());
}

ThreadPlacement configure_threads(const BackendConfig& config, const HostInventory& host) {
  if (config.threads < 0)
    throw UsageError("thread count must be 0 (one per core) or positive, got " +
                     std::to_string(config.threads));
  const std::vector<int> cpus = cpus_in_pinning_order(host);
  // OpenMP runtimes abort, rather than fail, when they cannot start thousands of threads.
  const int most = kMostThreadsPerCpu * std::max<int>(1, static_cast<int>(cpus.size()));
  if (config.threads > most)
    throw UsageError(
        fmt::format("--threads {} is more than {} ({} per CPU this process may use, {} CPUs)",
                    config.threads, most, kMostThreadsPerCpu, cpus.size()));
  ThreadPlacement placement;
  placement.threads = choose_thread_count(config, host, &placement.note);
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
  placement.cores_used = physical_cores_used(host, placement.affinity);
  return placement;
}

}  // namespace tb::cpu
