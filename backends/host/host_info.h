// What the host is: read once from /proc and /sys, recorded in every report.
//
// The readers take the root of the file system as a parameter (default "/") so tests can point
// them at a fake tree; the parsers are pure functions of the file text.
#pragma once

#include <sched.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/host/caches.h"
#include "backends/host/isa.h"

namespace tb::cpu {

struct CpuCore {
  int package = 0, core = 0;
  std::vector<int> logical_cpus;  // hardware threads of this core in the affinity, ascending
};

// What /proc/cpuinfo says about the first CPU. On x86 family / model / stepping identify the
// microarchitecture where `model name` does not (a VM's "AMD EPYC" is any of Zen 1 to Zen 5);
// on Arm the MIDR's implementer and part do (0x41 0xd0c: Neoverse N1), as /proc/cpuinfo's
// `CPU implementer` / `CPU part` or sysfs's midr_el1 give them.
struct CpuIdentity {
  std::string vendor;      // vendor_id: GenuineIntel, AuthenticAMD; Arm: the implementer's name
  std::string model_name;  // `model name` (x86) or `Model` (Arm boards); Arm: from the part
  int family = -1, model = -1, stepping = -1;  // -1: not reported (not x86)
  std::string microcode;                       // as the kernel prints it, e.g. "0x1000065"
  std::vector<std::string> flags;              // `flags` (x86) or `Features` (Arm)
  int implementer = -1, part = -1, variant = -1, revision = -1;  // Arm MIDR; -1: not Arm
};

// The Arm MIDR_EL1 fields as sysfs writes the register ("0x00000000410fd0c1"); nullopt for
// text that is no number.
struct Midr {
  int implementer = 0, variant = 0, part = 0, revision = 0;
};
std::optional<Midr> parse_midr(std::string_view text);
// "ARM", "NVIDIA", "Ampere", ... for an implementer code; "" for one not known.
std::string_view arm_implementer_name(int implementer);
// "Neoverse N1", ... for an Arm Ltd (0x41) part; "" for one not known.
std::string_view arm_part_name(int implementer, int part);
// Fills the Arm name fields of `id` (vendor, model_name where /proc/cpuinfo has none) from its
// implementer and part.
void name_arm_cpu(CpuIdentity* id);

// Whether this process runs under an emulator, from what it can see: a /proc/cpuinfo of
// another architecture than the binary's (qemu-user passes the host's through), or QEMU_*
// variables in the environment. `binary_arch`: "aarch64", "x86_64"; `qemu_variable`: the name
// of a QEMU_* environment variable, or empty. Empty: none detected; else why.
std::string detect_emulation(std::string_view binary_arch, const CpuIdentity& cpuinfo,
                             std::string_view qemu_variable);

// The cgroup CPU bandwidth limit on this process: quota / period, in CPUs.
struct CpuQuota {
  double cpus = 0;     // 0: no limit
  std::string source;  // the file that set it, for the report
};

struct HostInventory {
  std::string cpu_model;  // CpuIdentity::model_name
  CpuIdentity cpu;
  int sockets = 0, cores = 0, logical_cpus = 0;
  std::vector<int> online_cpus;        // from cpu/online
  int threads_per_core = 1;            // most SMT siblings on one core (thread_siblings_list)
  std::vector<CpuCore> cores_allowed;  // cores with at least one CPU in this process's affinity
  std::uint64_t memory_total_bytes = 0, memory_available_bytes = 0;
  int numa_nodes = 0;
  std::vector<std::string> isa;                // the flags that decide which kernels can run
  std::vector<CacheLevel> caches;              // the first online CPU's caches, by index
  std::vector<CacheInstance> cache_instances;  // every distinct cache of the online CPUs
  // Where the caches came from: "sysfs", the CPUID leaf read where /sys has no cache directory
  // ("cpuid leaves 0x80000005/6"), or "unknown" (neither: the lists above are empty).
  std::string cache_source;
  CpuQuota cpu_quota;
  std::string transparent_hugepages;  // the bracketed mode: always, madvise or never; empty: none
  std::uint64_t huge_page_bytes = 0;  // the kernel's transparent huge page (PMD) size; 0: none
  std::string os, kernel;
  ArmFeatures arm;        // aarch64: from AT_HWCAP (this host) or cpuinfo Features (a tree)
  std::string emulation;  // empty: no emulator detected; else why timings mean nothing

  bool has_isa(const std::string& flag) const;
  // The CPUs this process may run on (the union of cores_allowed), ascending.
  std::vector<int> allowed_cpus() const;
  int last_level() const;  // the highest cache level holding data
  // Sum of the distinct last-level caches that serve at least one of `cpus`: on a many-CCX
  // EPYC or a two-socket host that is every L3 the threads can fill, not cpu0's one.
  std::uint64_t last_level_cache_bytes(std::span<const int> cpus) const;
  int last_level_cache_instances(std::span<const int> cpus) const;
  // Over the CPUs this process may run on.
  std::uint64_t last_level_cache_bytes() const;
  // What sizes cache-dependent buffers (STREAM's arrays, the flush buffer): the figure above,
  // or kAssumedLastLevelCacheBytes where no source gave one; never 0.
  std::uint64_t last_level_cache_bytes_for_sizing(std::span<const int> cpus) const;
};

// The last-level cache assumed where neither /sys nor CPUID gives one: 32 MiB, one current
// server L3 slice (a Zen 3/4/5 CCD, a Sapphire Rapids tile's share is less), so buffers sized
// at 4x it still leave every cache of such a part.
inline constexpr std::uint64_t kAssumedLastLevelCacheBytes = std::uint64_t{32} << 20;

// Parsers of the kernel's text formats, pure so tests can feed them any machine.
CpuIdentity parse_cpuinfo(std::string_view text);
// A cpulist as sysfs writes it, "0-3,8,10-11" (also "0-15:2" strides); ascending, unique.
// Malformed pieces are skipped.
std::vector<int> parse_cpu_list(std::string_view text);
// The inverse: ascending CPUs as ranges, "0-3,8,10-11".
std::string format_cpu_list(std::span<const int> cpus);
// cgroup v2 cpu.max, "150000 100000" -> 1.5; "max 100000" (no limit) or garbage -> nullopt.
std::optional<double> parse_cgroup2_cpu_max(std::string_view text);
// cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us; a quota of -1 (no limit) -> nullopt.
std::optional<double> parse_cgroup1_quota(std::string_view quota, std::string_view period);
// The bracketed choice of a sysfs mode file: "always [madvise] never" -> "madvise".
std::string parse_bracketed_choice(std::string_view text);
// "48K", "4096K", "480M" as sysfs writes cache sizes.
std::uint64_t parse_cache_size(std::string_view text);

// The tightest CPU bandwidth limit on this process's cgroup or any of its ancestors, from
// <root>/proc/self/cgroup and the cgroup v2 (cpu.max) or v1 (cpu.cfs_*) files under
// <root>/sys/fs/cgroup.
CpuQuota read_cpu_quota(const std::filesystem::path& root = "/");

// This machine, for the CPUs this process was started on.
HostInventory read_host_inventory();
// This machine, for a process allowed `allowed_cpus` of them (a rank's share of its host's).
HostInventory read_host_inventory(std::span<const int> allowed_cpus);
// The machine described by the tree under `root`, for a process allowed `allowed_cpus`; its
// caches from `cpuid` where the tree has no /sys cache directory (a fixture tree of another
// machine gets none by default, this host's CPUID being no description of it).
HostInventory read_host_inventory(const std::filesystem::path& root,
                                  std::span<const int> allowed_cpus,
                                  const CpuidReader& cpuid = no_cpuid);
// The CPUs this process was started on, captured before any thread was pinned.
const cpu_set_t& process_cpus();
std::vector<int> process_cpu_list();  // the same, as sorted CPU numbers
// Free memory now, from /proc/meminfo (MemAvailable), in bytes.
std::uint64_t memory_available_bytes();
// This process's resident memory now (VmRSS) and its high-water mark (VmHWM), from
// /proc/self/status, in bytes; 0 where the kernel shows neither.
struct ResidentMemory {
  std::uint64_t now_bytes = 0, peak_bytes = 0;
};
ResidentMemory resident_memory();
// Starts the high-water mark again from the resident memory now (5 written to
// /proc/self/clear_refs, Linux 4.0 and later); false where the kernel refused.
bool reset_resident_peak();

// Core clock while running, from a chain of dependent integer multiplies (3 cycles each) timed
// on `threads` threads at once. When `load` is given every thread runs it right before each
// timing window, so the window sees the frequency that load sustains (an AVX-512 licence, the
// package power limit with every core busy); see host_info.cpp. The median over threads.
double measure_clock_ghz(int threads = 1, void (*load)() = nullptr);

}  // namespace tb::cpu
