// What the host is: read once from /proc and /sys, recorded in every report.
#pragma once

#include <sched.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tb::cpu {

struct CacheLevel {
  int level = 0;
  std::string type;  // Data, Instruction, Unified
  std::uint64_t bytes = 0;
};

struct CpuCore {
  int package = 0, core = 0;
  std::vector<int> logical_cpus;  // hardware threads of this core, ascending
};

struct HostInventory {
  std::string cpu_model;
  int sockets = 0, cores = 0, logical_cpus = 0;
  std::vector<CpuCore> cores_allowed;  // cores with at least one CPU in this process's affinity
  std::uint64_t memory_total_bytes = 0, memory_available_bytes = 0;
  int numa_nodes = 0;
  std::vector<std::string> isa;  // the flags that decide which kernels can run
  std::vector<CacheLevel> caches;
  std::string os, kernel;

  bool has_isa(const std::string& flag) const;
  std::uint64_t last_level_cache_bytes() const;
};

HostInventory read_host_inventory();
// The CPUs this process was started on, captured before any thread was pinned.
const cpu_set_t& process_cpus();
// Free memory now, from /proc/meminfo (MemAvailable), in bytes.
std::uint64_t memory_available_bytes();
// Core clock while running, measured with a chain of dependent integer adds (1 cycle each).
double measure_clock_ghz();

}  // namespace tb::cpu
