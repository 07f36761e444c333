#include "backends/host/caches.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tb::cpu {
namespace {

constexpr std::uint32_t kExtendedBase = 0x80000000u;
constexpr std::uint32_t kAmdCacheTopology = 0x8000001Du;
constexpr std::uint32_t kAmdL1 = 0x80000005u, kAmdL2L3 = 0x80000006u;
constexpr std::uint32_t kMaxSubleaves = 16;  // deterministic cache leaves list fewer than this

std::uint32_t bits(std::uint32_t value, int high, int low) {
  return (value >> low) & ((1u << (high - low + 1)) - 1u);
}

std::string vendor_of(const CpuidRegisters& leaf0) {
  char text[13] = {};
  std::memcpy(text, &leaf0.ebx, 4);
  std::memcpy(text + 4, &leaf0.edx, 4);
  std::memcpy(text + 8, &leaf0.ecx, 4);
  return text;
}

// Leaf 4 and leaf 0x8000001D share one layout: type EAX[4:0], level EAX[7:5], sharing logical
// processors EAX[25:14] + 1, and ways x partitions x line size x sets (each field + 1).
std::vector<CpuidCache> deterministic_caches(const CpuidReader& cpuid, std::uint32_t leaf) {
  std::vector<CpuidCache> caches;
  for (std::uint32_t subleaf = 0; subleaf < kMaxSubleaves; ++subleaf) {
    const CpuidRegisters r = cpuid(leaf, subleaf);
    const std::uint32_t type = bits(r.eax, 4, 0);
    if (type == 0 || type > 3) break;
    static constexpr const char* kTypes[] = {"", "Data", "Instruction", "Unified"};
    const std::uint64_t bytes = std::uint64_t{bits(r.ebx, 31, 22) + 1} * (bits(r.ebx, 21, 12) + 1) *
                                (bits(r.ebx, 11, 0) + 1) * (std::uint64_t{r.ecx} + 1);
    caches.push_back({static_cast<int>(bits(r.eax, 7, 5)), kTypes[type], bytes,
                      static_cast<int>(bits(r.eax, 25, 14) + 1)});
  }
  return caches;
}

// AMD's older leaves: L1 data and instruction sizes in KiB at ECX[31:24] / EDX[31:24] of
// 0x80000005, the L2 in KiB at ECX[31:16] and the L3 in 512 KiB units at EDX[31:18] of
// 0x80000006. They say nothing of sharing: L1 and L2 are taken per logical CPU (the sums of
// the last level are what sizing uses), the L3 as one for every CPU, as sizing by cpu0 assumed.
std::vector<CpuidCache> legacy_amd_caches(const CpuidReader& cpuid, std::uint32_t max_extended) {
  std::vector<CpuidCache> caches;
  if (max_extended >= kAmdL1) {
    const CpuidRegisters l1 = cpuid(kAmdL1, 0);
    if (const std::uint32_t kib = bits(l1.ecx, 31, 24))
      caches.push_back({1, "Data", kib * 1024ull, 1});
    if (const std::uint32_t kib = bits(l1.edx, 31, 24))
      caches.push_back({1, "Instruction", kib * 1024ull, 1});
  }
  if (max_extended >= kAmdL2L3) {
    const CpuidRegisters l2l3 = cpuid(kAmdL2L3, 0);
    if (const std::uint32_t kib = bits(l2l3.ecx, 31, 16))
      caches.push_back({2, "Unified", kib * 1024ull, 1});
    if (const std::uint32_t units = bits(l2l3.edx, 31, 18))
      caches.push_back({3, "Unified", units * (512ull << 10), 0});
  }
  return caches;
}

int ceil_log2(int value) {
  int shift = 0;
  while ((1 << shift) < value) ++shift;
  return shift;
}

}  // namespace

CpuidRegisters host_cpuid(std::uint32_t leaf, std::uint32_t subleaf) {
  CpuidRegisters r;
#if defined(__x86_64__)
  // __get_cpuid_count checks the leaf against the maximum CPUID reports: zeros beyond it.
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) r = {};
#else
  (void)leaf;
  (void)subleaf;
#endif
  return r;
}

CpuidRegisters no_cpuid(std::uint32_t, std::uint32_t) {
  return {};
}

std::string cpuid_vendor(const CpuidReader& cpuid) {
  return vendor_of(cpuid(0, 0));
}

std::uint64_t unchecked_amd_l1_bytes_per_cpu(const CpuidReader& cpuid) {
  const CpuidRegisters r = cpuid(kAmdCacheTopology, 0);
  const std::uint64_t bytes = (bits(r.ebx, 31, 22) + 1ull) * (bits(r.ebx, 21, 12) + 1ull) *
                              (bits(r.ebx, 11, 0) + 1ull) * (r.ecx + 1ull);
  return bytes / (bits(r.eax, 25, 14) + 1ull);
}

CpuidCaches decode_cpuid_caches(const CpuidReader& cpuid) {
  const CpuidRegisters leaf0 = cpuid(0, 0);
  const std::string vendor = vendor_of(leaf0);
  const bool amd = vendor == "AuthenticAMD" || vendor == "HygonGenuine";
  const std::uint32_t max_extended = cpuid(kExtendedBase, 0).eax;
  if (!amd && leaf0.eax >= 4) {
    std::vector<CpuidCache> caches = deterministic_caches(cpuid, 4);
    if (!caches.empty()) return {std::move(caches), "cpuid leaf 0x4"};
  }
  const bool topology_extensions =
      max_extended >= kExtendedBase + 1 && bits(cpuid(kExtendedBase + 1, 0).ecx, 22, 22);
  if (amd && topology_extensions && max_extended >= kAmdCacheTopology) {
    std::vector<CpuidCache> caches = deterministic_caches(cpuid, kAmdCacheTopology);
    if (!caches.empty()) return {std::move(caches), "cpuid leaf 0x8000001d"};
  }
  std::vector<CpuidCache> caches = legacy_amd_caches(cpuid, max_extended);
  if (!caches.empty()) return {std::move(caches), "cpuid leaves 0x80000005/6"};
  return {};
}

std::map<int, int> parse_apic_ids(std::string_view cpuinfo) {
  std::map<int, int> apic_ids;
  int processor = -1;
  auto number = [](std::string_view text) {
    text.remove_prefix(std::min(text.find_first_not_of(" \t"), text.size()));
    int value = -1;
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;
  };
  while (!cpuinfo.empty()) {
    const auto end = cpuinfo.find('\n');
    const std::string_view line = cpuinfo.substr(0, end);
    cpuinfo = end == std::string_view::npos ? std::string_view{} : cpuinfo.substr(end + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    key = key.substr(0, key.find_last_not_of(" \t") + 1);
    if (key == "processor") processor = number(line.substr(colon + 1));
    if (key == "apicid" && processor >= 0) apic_ids[processor] = number(line.substr(colon + 1));
  }
  std::erase_if(apic_ids, [](const auto& entry) { return entry.second < 0; });
  return apic_ids;
}

std::vector<CacheInstance> cache_instances_from_cpuid(const CpuidCaches& caches,
                                                      std::span<const int> online,
                                                      const std::map<int, int>& apic_ids) {
  const bool every_cpu_has_apic_id =
      std::all_of(online.begin(), online.end(), [&](int cpu) { return apic_ids.contains(cpu); });
  std::vector<CacheInstance> instances;
  for (const CpuidCache& cache : caches.levels) {
    std::map<long, std::vector<int>> groups;  // by APIC ID (or position) above the sharing bits
    for (std::size_t index = 0; index < online.size(); ++index) {
      const int cpu = online[index];
      long group = 0;
      if (cache.sharing_cpus > 0)
        group = every_cpu_has_apic_id ? apic_ids.at(cpu) >> ceil_log2(cache.sharing_cpus)
                                      : static_cast<long>(index) / cache.sharing_cpus;
      groups[group].push_back(cpu);
    }
    for (auto& [group, cpus] : groups) {
      std::sort(cpus.begin(), cpus.end());
      instances.push_back({cache.level, cache.type, cache.bytes, std::move(cpus)});
    }
  }
  return instances;
}

}  // namespace tb::cpu
