// Caches as the host inventory records them, and the cache hierarchy from CPUID for machines
// whose kernel shows no /sys cache directory (some virtual machines, Firecracker's among them).
// The decoders are pure functions of the register values, so tests can give any CPU's by hand.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tb::cpu {

struct CacheLevel {
  int level = 0;
  std::string type;  // Data, Instruction, Unified
  std::uint64_t bytes = 0;
};

// One physical cache: the CPUs in its shared_cpu_list share it.
struct CacheInstance {
  int level = 0;
  std::string type;
  std::uint64_t bytes = 0;
  std::vector<int> cpus;  // ascending
};

struct CpuidRegisters {
  std::uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};
// CPUID(leaf, subleaf) on some CPU; a leaf the CPU lacks reads as zeros.
using CpuidReader = std::function<CpuidRegisters(std::uint32_t leaf, std::uint32_t subleaf)>;

// This CPU's CPUID on x86-64. Elsewhere zeros: aarch64 keeps its cache geometry in CCSIDR_EL1,
// which user space cannot read (CTR_EL0 gives line sizes only), so there is no equivalent.
CpuidRegisters host_cpuid(std::uint32_t leaf, std::uint32_t subleaf);
// A reader that knows no leaf: what a fixture tree of another machine gets.
CpuidRegisters no_cpuid(std::uint32_t leaf, std::uint32_t subleaf);

struct CpuidCache {
  int level = 0;
  std::string type;  // Data, Instruction, Unified (as sysfs names them)
  std::uint64_t bytes = 0;
  int sharing_cpus = 0;  // logical CPUs (APIC IDs) sharing one instance; 0: every CPU
};

struct CpuidCaches {
  std::vector<CpuidCache> levels;  // one CPU's caches, L1 first
  std::string leaf;  // "cpuid leaf 0x4", "cpuid leaf 0x8000001d", "cpuid leaves 0x80000005/6"
};

// Intel (and others with leaf 4): the deterministic cache parameters of leaf 4. AMD and Hygon:
// leaf 0x8000001D where CPUID says TopologyExtensions, else the older 0x80000005 (L1) and
// 0x80000006 (L2, L3) leaves, whose L3 is taken as shared by every CPU. Empty `levels` where
// no leaf describes a cache.
CpuidCaches decode_cpuid_caches(const CpuidReader& cpuid);

// Leaf 0's vendor string ("AuthenticAMD", "GenuineIntel"; empty where CPUID reads zeros).
std::string cpuid_vendor(const CpuidReader& cpuid);
// Leaf 0x8000001D's first subleaf read as the L1 data cache whatever its type field says, in
// bytes per sharing logical CPU: what a reader that trusts the leaf unchecked takes (oneDNN 3.x
// before 3.8, through xbyak before 7.06). 1 where the leaf is all zeros.
std::uint64_t unchecked_amd_l1_bytes_per_cpu(const CpuidReader& cpuid);

// Each logical CPU's APIC ID from /proc/cpuinfo ("processor" and "apicid" lines); empty where
// the kernel prints none (not x86).
std::map<int, int> parse_apic_ids(std::string_view cpuinfo);

// The distinct caches of the `online` CPUs: the CPUs whose APIC IDs agree above the bits that
// number the sharing CPUs share one instance (Intel SDM, leaf 4's EAX[25:14]). Without APIC IDs
// the CPUs are taken in order, `sharing_cpus` at a time.
std::vector<CacheInstance> cache_instances_from_cpuid(const CpuidCaches& caches,
                                                      std::span<const int> online,
                                                      const std::map<int, int>& apic_ids);

}  // namespace tb::cpu
