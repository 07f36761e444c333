// The host inventory's parsers and readers against fake /proc and /sys trees, and the peak
// table against the CPUs it must tell apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/host/host_info.h"
#include "backends/host/peak.h"
#include "backends/host/peak_table.h"
#include "backends/host/threading.h"
#include "reports/compare.h"
#include "tests/scoped_env.h"
#include "tests/temp_dir.h"

namespace tb::cpu {
namespace {

using testing_support::TempDir;
namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

// A /proc/cpuinfo block for one CPU as the kernel prints it.
std::string cpuinfo_block(int processor, const std::string& vendor, int family, int model,
                          int stepping, const std::string& name, const std::string& flags) {
  return "processor\t: " + std::to_string(processor) + "\nvendor_id\t: " + vendor +
         "\ncpu family\t: " + std::to_string(family) + "\nmodel\t\t: " + std::to_string(model) +
         "\nmodel name\t: " + name + "\nstepping\t: " + std::to_string(stepping) +
         "\nmicrocode\t: 0xa0011d1\ncpu MHz\t\t: 2596.120\nflags\t\t: " + flags + "\n\n";
}

const std::string kZen4Flags =
    "fpu sse sse2 avx avx2 fma f16c avx512f avx512dq avx512bw "
    "avx512vl avx512_bf16 avx512_vnni";

CpuIdentity identity(const std::string& vendor, int family, int model, int stepping,
                     const std::string& name, const std::string& flags = kZen4Flags) {
  return parse_cpuinfo(cpuinfo_block(0, vendor, family, model, stepping, name, flags));
}

// Two CCXs of two SMT cores each: CPUs 0,1 + 4,5 share one 16 MiB L3, 2,3 + 6,7 the other.
// CPU n and n+4 are one core's two threads, as Linux numbers them on AMD and Intel.
void write_two_ccx_tree(const fs::path& root) {
  std::string cpuinfo;
  for (int cpu = 0; cpu < 8; ++cpu)
    cpuinfo += cpuinfo_block(cpu, "AuthenticAMD", 25, 1, 1, "AMD EPYC", kZen4Flags);
  write(root / "proc/cpuinfo", cpuinfo);
  write(root / "proc/meminfo",
        "MemTotal:       16318480 kB\nMemAvailable:   12000000 kB\nHugepagesize:       2048 kB");
  const fs::path cpus = root / "sys/devices/system/cpu";
  write(cpus / "online", "0-7");
  for (int cpu = 0; cpu < 8; ++cpu) {
    const fs::path dir = cpus / ("cpu" + std::to_string(cpu));
    const int core = cpu % 4;
    write(dir / "topology/physical_package_id", "0");
    write(dir / "topology/core_id", std::to_string(core));
    write(dir / "topology/thread_siblings_list",
          std::to_string(core) + "," + std::to_string(core + 4));
    const std::string siblings = std::to_string(core) + "," + std::to_string(core + 4);
    const std::string ccx = core < 2 ? "0-1,4-5" : "2-3,6-7";
    const std::tuple<int, const char*, const char*, std::string> caches[] = {
        {1, "Data", "32K", siblings},
        {1, "Instruction", "32K", siblings},
        {2, "Unified", "512K", siblings},
        {3, "Unified", "16384K", ccx}};
    int index = 0;
    for (const auto& [level, type, size, shared] : caches) {
      const fs::path cache = dir / "cache" / ("index" + std::to_string(index++));
      write(cache / "level", std::to_string(level));
      write(cache / "type", type);
      write(cache / "size", size);
      write(cache / "shared_cpu_list", shared);
    }
  }
  write(root / "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never");
  write(root / "sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "2097152");
  write(root / "proc/self/cgroup", "0::/");
}

std::vector<int> range(int first, int last) {
  std::vector<int> cpus;
  for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  return cpus;
}

TEST(CpuList, ParsesRangesSinglesAndStrides) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("0-15:4"), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(parse_cpu_list("5,1,3-2,x-y,1"), (std::vector<int>{1, 5}));  // bad pieces skipped
  EXPECT_TRUE(parse_cpu_list("").empty());
  EXPECT_EQ(format_cpu_list(std::vector<int>{0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list(std::vector<int>{}), "");
}

TEST(Cpuinfo, FamilyAndModelTellVmEpycsApart) {
  const CpuIdentity zen3 = identity("AuthenticAMD", 25, 1, 1, "AMD EPYC");
  const CpuIdentity zen5 = identity("AuthenticAMD", 26, 2, 1, "AMD EPYC");
  EXPECT_EQ(zen3.model_name, zen5.model_name);
  EXPECT_EQ(zen3.vendor, "AuthenticAMD");
  EXPECT_EQ(zen3.family, 25);
  EXPECT_EQ(zen3.model, 1);
  EXPECT_EQ(zen3.stepping, 1);
  EXPECT_EQ(zen3.microcode, "0xa0011d1");
  EXPECT_EQ(zen5.family, 26);
  EXPECT_NE(std::find(zen5.flags.begin(), zen5.flags.end(), "avx512f"), zen5.flags.end());
  EXPECT_EQ(lookup_peak_spec(zen3).row.microarchitecture, "Zen 3");
  EXPECT_EQ(lookup_peak_spec(zen5).row.microarchitecture, "Zen 5 (server / desktop)");
}

TEST(Cpuinfo, ArmHasNoX86Identity) {
  const CpuIdentity arm = parse_cpuinfo(
      "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x41\n");
  EXPECT_EQ(arm.family, -1);
  EXPECT_EQ(arm.model, -1);
  EXPECT_EQ(arm.flags, (std::vector<std::string>{"fp", "asimd", "sve"}));
}

TEST(Cgroup, ParsesQuotas) {
  EXPECT_DOUBLE_EQ(*parse_cgroup2_cpu_max("150000 100000\n"), 1.5);
  EXPECT_FALSE(parse_cgroup2_cpu_max("max 100000").has_value());
  EXPECT_FALSE(parse_cgroup2_cpu_max("").has_value());
  EXPECT_DOUBLE_EQ(*parse_cgroup1_quota("50000", "100000"), 0.5);
  EXPECT_FALSE(parse_cgroup1_quota("-1", "100000").has_value());
  EXPECT_EQ(quota_thread_cap(1.5), 2);
  EXPECT_EQ(quota_thread_cap(2.0), 2);
  EXPECT_EQ(quota_thread_cap(0.2), 1);
  EXPECT_EQ(quota_thread_cap(0), 0);
}

TEST(Cgroup, V2TightestLimitUpTheTree) {
  TempDir dir("tb-cgroup2");
  const fs::path root = dir.path();
  write(root / "proc/self/cgroup", "0::/job.slice/run");
  write(root / "sys/fs/cgroup/job.slice/run/cpu.max", "150000 100000");
  write(root / "sys/fs/cgroup/job.slice/cpu.max", "max 100000");
  CpuQuota quota = read_cpu_quota(root);
  EXPECT_DOUBLE_EQ(quota.cpus, 1.5);
  EXPECT_NE(quota.source.find("job.slice/run/cpu.max"), std::string::npos) << quota.source;

  write(root / "sys/fs/cgroup/job.slice/cpu.max", "100000 100000");  // the parent is tighter
  EXPECT_DOUBLE_EQ(read_cpu_quota(root).cpus, 1.0);
}

TEST(Cgroup, V1QuotaAndNone) {
  TempDir dir("tb-cgroup1");
  const fs::path root = dir.path();
  write(root / "proc/self/cgroup", "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n");
  write(root / "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000");
  write(root / "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000");
  EXPECT_DOUBLE_EQ(read_cpu_quota(root).cpus, 2.5);

  write(root / "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1");
  EXPECT_EQ(read_cpu_quota(root).cpus, 0);
}

TEST(HostTree, SumsDistinctLastLevelCaches) {
  TempDir dir("tb-two-ccx");
  write_two_ccx_tree(dir.path());
  const HostInventory host = read_host_inventory(dir.path(), range(0, 7));
  EXPECT_EQ(host.logical_cpus, 8);
  EXPECT_EQ(host.cores, 4);
  EXPECT_EQ(host.sockets, 1);
  EXPECT_EQ(host.threads_per_core, 2);
  ASSERT_EQ(host.cores_allowed.size(), 4u);
  EXPECT_EQ(host.cores_allowed[1].logical_cpus, (std::vector<int>{1, 5}));
  EXPECT_EQ(host.last_level(), 3);
  EXPECT_EQ(host.last_level_cache_bytes(), std::uint64_t{32} << 20);  // two 16 MiB L3s
  EXPECT_EQ(host.last_level_cache_instances(host.allowed_cpus()), 2);
  const std::vector<int> one_ccx = {0, 4};
  EXPECT_EQ(host.last_level_cache_bytes(one_ccx), std::uint64_t{16} << 20);
  ASSERT_EQ(host.caches.size(), 4u);  // cpu0's levels, as the report's caches list
  EXPECT_EQ(host.caches[3].bytes, std::uint64_t{16} << 20);
  EXPECT_EQ(host.cpu.family, 25);
  EXPECT_EQ(host.cpu_model, "AMD EPYC");
  EXPECT_EQ(host.transparent_hugepages, "madvise");
  EXPECT_EQ(host.huge_page_bytes, std::uint64_t{2} << 20);
  EXPECT_EQ(host.memory_total_bytes, std::uint64_t{16318480} * 1024);
  EXPECT_EQ(host.cpu_quota.cpus, 0);
}

TEST(HostTree, AffinityLimitsCoresAndCaches) {
  TempDir dir("tb-affinity");
  write_two_ccx_tree(dir.path());
  const std::vector<int> allowed = {0, 1, 4};  // two cores of the first CCX, one with SMT
  const HostInventory host = read_host_inventory(dir.path(), allowed);
  ASSERT_EQ(host.cores_allowed.size(), 2u);
  EXPECT_EQ(host.cores_allowed[0].logical_cpus, (std::vector<int>{0, 4}));
  EXPECT_EQ(host.last_level_cache_bytes(), std::uint64_t{16} << 20);
  EXPECT_EQ(physical_cores_used(host, std::vector<int>{0, 4}), 1);  // SMT siblings: one core
  EXPECT_EQ(physical_cores_used(host, std::vector<int>{0, 1}), 2);
  EXPECT_EQ(physical_cores_used(host, std::vector<int>{-1, -1, -1}), 2);  // unpinned
}

TEST(HostTree, OfflineCpusAndHugePageSizeFromMeminfo) {
  TempDir dir("tb-offline");
  write_two_ccx_tree(dir.path());
  write(dir.file("sys/devices/system/cpu/online"), "0-2,4-7");  // cpu3 offline
  fs::remove(dir.file("sys/kernel/mm/transparent_hugepage/hpage_pmd_size"));
  const HostInventory host = read_host_inventory(dir.path(), range(0, 7));
  EXPECT_EQ(host.logical_cpus, 7);
  EXPECT_EQ(host.online_cpus, (std::vector<int>{0, 1, 2, 4, 5, 6, 7}));
  EXPECT_EQ(host.huge_page_bytes, std::uint64_t{2} << 20);  // Hugepagesize: 2048 kB
}

TEST(Threading, QuotaCapsTheDefaultAndSaysSo) {
  TempDir dir("tb-quota");
  write_two_ccx_tree(dir.path());
  write(dir.file("proc/self/cgroup"), "0::/limited");
  write(dir.file("sys/fs/cgroup/limited/cpu.max"), "150000 100000");
  const HostInventory host = read_host_inventory(dir.path(), range(0, 7));
  EXPECT_DOUBLE_EQ(host.cpu_quota.cpus, 1.5);
  // Unpinned: the fake tree's CPUs are not this machine's.
  const ThreadPlacement placement = configure_threads(BackendConfig{0, PinPolicy::none}, host);
  EXPECT_EQ(placement.threads, 2);
  EXPECT_NE(placement.note.find("cgroup CPU quota of 1.50 CPUs"), std::string::npos)
      << placement.note;
  const ThreadPlacement explicit_four = configure_threads(BackendConfig{4, PinPolicy::none}, host);
  EXPECT_EQ(explicit_four.threads, 4);
  EXPECT_NE(explicit_four.note.find("throttles"), std::string::npos) << explicit_four.note;
  configure_threads(BackendConfig{}, read_host_inventory());  // restore for later tests
}

// What every machine has, whatever its kernel shows: a named cache source and a size to size
// buffers by. A machine with neither /sys cache directory nor CPUID cache leaf is legal.
TEST(HostInventory, ThisMachineHasIdentityAndCaches) {
  const HostInventory host = read_host_inventory();
  EXPECT_FALSE(host.online_cpus.empty()) << "this machine's /sys/devices/system/cpu/online";
  EXPECT_GE(host.threads_per_core, 1);
  ASSERT_FALSE(host.cache_source.empty());
  EXPECT_GT(host.last_level_cache_bytes_for_sizing(host.allowed_cpus()), 0u)
      << "cache source: " << host.cache_source;
  if (host.cache_source != "unknown") {
    EXPECT_GT(host.last_level_cache_bytes(), 0u)
        << "this machine's caches, read from " << host.cache_source << ", have no size";
  }
#if defined(__x86_64__)
  EXPECT_GT(host.cpu.family, 0) << "this machine's /proc/cpuinfo has no 'cpu family'";
  EXPECT_FALSE(host.cpu.vendor.empty()) << "this machine's /proc/cpuinfo has no vendor_id";
  // Every x86-64 CPU of the last 15 years describes its caches in CPUID (leaf 4 or AMD's
  // extended leaves), so this machine's caches are known from one source or the other.
  EXPECT_NE(host.cache_source, "unknown")
      << "neither /sys/devices/system/cpu/cpu0/cache nor a CPUID cache leaf on this "
      << host.cpu.vendor << " family " << host.cpu.family << " model " << host.cpu.model;
#endif
}

// ---- caches from CPUID, where /sys has none ----

// A CPU given by hand: the registers of each (leaf, subleaf), zeros elsewhere.
struct FakeCpuid {
  std::map<std::pair<std::uint32_t, std::uint32_t>, CpuidRegisters> leaves;
  CpuidRegisters operator()(std::uint32_t leaf, std::uint32_t subleaf) const {
    const auto found = leaves.find({leaf, subleaf});
    return found == leaves.end() ? CpuidRegisters{} : found->second;
  }
};

// Leaf 0's vendor string sits in EBX, EDX, ECX in that order.
CpuidRegisters leaf0(std::uint32_t max_leaf, const char (&vendor)[13]) {
  CpuidRegisters r{max_leaf, 0, 0, 0};
  std::memcpy(&r.ebx, vendor, 4);
  std::memcpy(&r.edx, vendor + 4, 4);
  std::memcpy(&r.ecx, vendor + 8, 4);
  return r;
}

// One deterministic-cache subleaf (leaf 4 / 0x8000001D layout).
CpuidRegisters cache_leaf(int type, int level, int sharing, int ways, int line, int sets) {
  return {static_cast<std::uint32_t>(type | level << 5 | (sharing - 1) << 14),
          static_cast<std::uint32_t>((line - 1) | 0 << 12 | (ways - 1) << 22),
          static_cast<std::uint32_t>(sets - 1), 0};
}

// The registers of the AMD Zen 5 VM (family 26 model 2, Firecracker) whose kernel lists no
// caches: no TopologyExtensions bit, so only the older leaves 0x80000005/6 describe them.
FakeCpuid zen5_firecracker() {
  FakeCpuid cpu;
  cpu.leaves[{0, 0}] = leaf0(0xd, "AuthenticAMD");
  cpu.leaves[{0x80000000, 0}] = {0x80000021, 0, 0, 0};
  cpu.leaves[{0x80000001, 0}] = {0, 0, 0x440001f1, 0};
  cpu.leaves[{0x80000005, 0}] = {0xff60ff40, 0xff60ff40, 0x300c0140, 0x20080140};
  cpu.leaves[{0x80000006, 0}] = {0x40802040, 0x60804040, 0x04006140, 0x0fe09140};
  return cpu;
}

TEST(CpuidCaches, AmdOlderLeavesWithoutTopologyExtensions) {
  const CpuidCaches caches = decode_cpuid_caches(zen5_firecracker());
  EXPECT_EQ(caches.leaf, "cpuid leaves 0x80000005/6");
  ASSERT_EQ(caches.levels.size(), 4u);
  EXPECT_EQ(caches.levels[0].bytes, 48u << 10);  // L1 data
  EXPECT_EQ(caches.levels[0].type, "Data");
  EXPECT_EQ(caches.levels[1].bytes, 32u << 10);  // L1 instruction
  EXPECT_EQ(caches.levels[2].bytes, 1u << 20);   // L2
  EXPECT_EQ(caches.levels[3].level, 3);
  EXPECT_EQ(caches.levels[3].bytes, std::uint64_t{1016} * (512 << 10));  // 508 MiB L3 field
  EXPECT_EQ(caches.levels[3].sharing_cpus, 0);                           // every CPU
}

TEST(CpuidCaches, AmdTopologyLeafGivesSharing) {
  FakeCpuid cpu = zen5_firecracker();
  cpu.leaves[{0x80000001, 0}].ecx |= 1u << 22;  // TopologyExtensions
  cpu.leaves[{0x8000001d, 0}] = cache_leaf(1, 1, 2, 12, 64, 64);
  cpu.leaves[{0x8000001d, 1}] = cache_leaf(2, 1, 2, 8, 64, 64);
  cpu.leaves[{0x8000001d, 2}] = cache_leaf(3, 2, 2, 16, 64, 1024);
  cpu.leaves[{0x8000001d, 3}] = cache_leaf(3, 3, 16, 16, 64, 32768);  // 32 MiB per 8-core CCX
  const CpuidCaches caches = decode_cpuid_caches(cpu);
  EXPECT_EQ(caches.leaf, "cpuid leaf 0x8000001d");
  ASSERT_EQ(caches.levels.size(), 4u);
  EXPECT_EQ(caches.levels[3].bytes, std::uint64_t{32} << 20);
  // 32 CPUs, APIC IDs 0-31: two CCXs of 16 threads, one L3 each.
  std::map<int, int> apic_ids;
  std::vector<int> online;
  for (int cpu_number = 0; cpu_number < 32; ++cpu_number) {
    apic_ids[cpu_number] = cpu_number;
    online.push_back(cpu_number);
  }
  const std::vector<CacheInstance> instances = cache_instances_from_cpuid(caches, online, apic_ids);
  std::vector<CacheInstance> l3;
  for (const CacheInstance& instance : instances)
    if (instance.level == 3) l3.push_back(instance);
  ASSERT_EQ(l3.size(), 2u);
  EXPECT_EQ(l3[0].cpus, range(0, 15));
  EXPECT_EQ(l3[1].cpus, range(16, 31));
  // The topology leaf lists nothing: the older leaves still do.
  cpu.leaves.erase({0x8000001d, 0});
  EXPECT_EQ(decode_cpuid_caches(cpu).leaf, "cpuid leaves 0x80000005/6");
}

TEST(CpuidCaches, IntelLeafFourAndSocketsByApicId) {
  FakeCpuid cpu;
  cpu.leaves[{0, 0}] = leaf0(0x20, "GenuineIntel");
  cpu.leaves[{4, 0}] = cache_leaf(1, 1, 2, 12, 64, 64);       // 48 KiB L1d
  cpu.leaves[{4, 1}] = cache_leaf(2, 1, 2, 8, 64, 64);        // 32 KiB L1i
  cpu.leaves[{4, 2}] = cache_leaf(3, 2, 2, 16, 64, 2048);     // 2 MiB L2
  cpu.leaves[{4, 3}] = cache_leaf(3, 3, 128, 15, 64, 57344);  // 52.5 MiB L3 per socket
  const CpuidCaches caches = decode_cpuid_caches(cpu);
  EXPECT_EQ(caches.leaf, "cpuid leaf 0x4");
  ASSERT_EQ(caches.levels.size(), 4u);
  EXPECT_EQ(caches.levels[0].bytes, 48u << 10);
  EXPECT_EQ(caches.levels[3].bytes, std::uint64_t{15} * 64 * 57344);
  // Two sockets whose APIC IDs start at 0 and 128; CPU n and n+4 are one core's threads.
  const std::string cpuinfo =
      "processor\t: 0\napicid\t\t: 0\n\nprocessor\t: 1\napicid\t\t: 2\n\n"
      "processor\t: 2\napicid\t\t: 128\n\nprocessor\t: 3\napicid\t\t: 130\n\n"
      "processor\t: 4\napicid\t\t: 1\n\nprocessor\t: 5\napicid\t\t: 3\n\n"
      "processor\t: 6\napicid\t\t: 129\n\nprocessor\t: 7\napicid\t\t: 131\n";
  const std::map<int, int> apic_ids = parse_apic_ids(cpuinfo);
  ASSERT_EQ(apic_ids.size(), 8u);
  EXPECT_EQ(apic_ids.at(6), 129);
  const std::vector<CacheInstance> instances =
      cache_instances_from_cpuid(caches, range(0, 7), apic_ids);
  std::vector<std::vector<int>> l3, l2;
  for (const CacheInstance& instance : instances) {
    if (instance.level == 3) l3.push_back(instance.cpus);
    if (instance.level == 2) l2.push_back(instance.cpus);
  }
  EXPECT_EQ(l3, (std::vector<std::vector<int>>{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(l2.size(), 4u);  // a core's two threads share one
  EXPECT_EQ(l2[0], (std::vector<int>{0, 4}));
  // Without APIC IDs, CPUs in order, `sharing` at a time.
  EXPECT_EQ(cache_instances_from_cpuid(caches, range(0, 7), {}).size(), 4u + 4 + 4 + 1);
}

TEST(CpuidCaches, NoLeafNoCaches) {
  EXPECT_TRUE(decode_cpuid_caches(FakeCpuid{}).levels.empty());
  EXPECT_TRUE(decode_cpuid_caches(no_cpuid).leaf.empty());
  FakeCpuid amd_without_cache_leaves;
  amd_without_cache_leaves.leaves[{0, 0}] = leaf0(0xd, "AuthenticAMD");
  amd_without_cache_leaves.leaves[{0x80000000, 0}] = {0x80000004, 0, 0, 0};
  EXPECT_TRUE(decode_cpuid_caches(amd_without_cache_leaves).levels.empty());
}

// The machine the issue was found on: no /sys cache directory. Its sizes come from CPUID.
TEST(HostTree, WithoutSysfsCachesTheInventoryReadsCpuid) {
  TempDir dir("tb-no-sysfs-caches");
  write_two_ccx_tree(dir.path());
  for (int cpu = 0; cpu < 8; ++cpu)
    fs::remove_all(dir.file("sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache"));
  const HostInventory host = read_host_inventory(dir.path(), range(0, 7), zen5_firecracker());
  EXPECT_EQ(host.cache_source, "cpuid leaves 0x80000005/6");
  EXPECT_EQ(host.last_level(), 3);
  EXPECT_EQ(host.last_level_cache_bytes(), std::uint64_t{1016} * (512 << 10));
  EXPECT_EQ(host.last_level_cache_instances(host.allowed_cpus()), 1);
  ASSERT_EQ(host.caches.size(), 4u);
  EXPECT_EQ(host.caches[0].bytes, 48u << 10);
  EXPECT_EQ(host.last_level_cache_bytes_for_sizing(host.allowed_cpus()),
            host.last_level_cache_bytes());
}

TEST(HostTree, NeitherSysfsNorCpuidSaysUnknownAndSizesByTheStatedDefault) {
  TempDir dir("tb-no-caches");
  write_two_ccx_tree(dir.path());
  for (int cpu = 0; cpu < 8; ++cpu)
    fs::remove_all(dir.file("sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache"));
  const HostInventory host = read_host_inventory(dir.path(), range(0, 7));
  EXPECT_EQ(host.cache_source, "unknown");
  EXPECT_TRUE(host.caches.empty());
  EXPECT_EQ(host.last_level_cache_bytes(), 0u);
  EXPECT_EQ(host.last_level_cache_bytes_for_sizing(host.allowed_cpus()),
            kAssumedLastLevelCacheBytes);
  // A tree with caches names sysfs, and CPUID is not consulted.
  TempDir with("tb-sysfs-caches");
  write_two_ccx_tree(with.path());
  EXPECT_EQ(read_host_inventory(with.path(), range(0, 7), zen5_firecracker()).cache_source,
            "sysfs");
}

// ---- the peak table ----

double fp32(const CpuIdentity& cpu, Isa level) {
  return fp32_flops_per_cycle(lookup_peak_spec(cpu).row, level);
}

TEST(PeakTable, AmdZenGenerations) {
  const CpuIdentity zen3 = identity("AuthenticAMD", 25, 0x01, 1, "AMD EPYC 7763 64-Core");
  const CpuIdentity zen4 = identity("AuthenticAMD", 25, 0x11, 1, "AMD EPYC 9654 96-Core");
  const CpuIdentity zen5 = identity("AuthenticAMD", 26, 0x02, 1, "AMD EPYC");
  EXPECT_EQ(fp32(zen3, Isa::avx2), 32);
  EXPECT_EQ(fp32(zen3, Isa::avx512), 0);     // no AVX-512
  EXPECT_EQ(fp32(zen3, Isa::portable), 16);  // mul on 2 FMA pipes, add on 2 FADD pipes
  // Zen 4 double-pumps 512-bit ops on its 256-bit pipes: no more FLOP/cycle than AVX2.
  EXPECT_EQ(fp32(zen4, Isa::avx2), 32);
  EXPECT_EQ(fp32(zen4, Isa::avx512), 32);
  EXPECT_EQ(fp32(zen5, Isa::avx512), 64);
  EXPECT_EQ(fp32(zen5, Isa::avx2), 32);
  const PeakRow& row = lookup_peak_spec(zen5).row;
  EXPECT_EQ(bf16_flops_per_cycle(row, Isa::avx512, true, false), 128);
  EXPECT_EQ(bf16_flops_per_cycle(row, Isa::avx2, true, false), 0);
  EXPECT_NE(std::string(row.source).find("58455"), std::string::npos);
  const CpuIdentity strix = identity("AuthenticAMD", 26, 0x24, 0, "AMD Ryzen AI 9 HX 370");
  EXPECT_EQ(fp32(strix, Isa::avx512), 32);  // mobile Zen 5 double-pumps
}

TEST(PeakTable, XeonSkusWithOneOrTwoFmaUnits) {
  const std::string flags = kZen4Flags;
  auto xeon = [&](const std::string& name, int stepping) {
    return identity("GenuineIntel", 6, 0x55, stepping, "Intel(R) Xeon(R) " + name, flags);
  };
  EXPECT_EQ(fp32(xeon("Gold 6248 CPU @ 2.50GHz", 7), Isa::avx512), 64);
  EXPECT_EQ(fp32(xeon("Platinum 8180 CPU @ 2.50GHz", 4), Isa::avx512), 64);
  EXPECT_EQ(fp32(xeon("Gold 5218 CPU @ 2.30GHz", 7), Isa::avx512), 32);
  EXPECT_EQ(fp32(xeon("Silver 4114 CPU @ 2.20GHz", 4), Isa::avx512), 32);
  EXPECT_EQ(fp32(xeon("Bronze 3106 CPU @ 1.70GHz", 4), Isa::avx512), 32);
  EXPECT_EQ(fp32(xeon("Gold 5122 CPU @ 3.60GHz", 4), Isa::avx512), 64);    // the 2-FMA Gold 5
  EXPECT_EQ(fp32(xeon("Gold 5318H CPU @ 2.50GHz", 11), Isa::avx512), 64);  // Cooper Lake
  EXPECT_EQ(fp32(xeon("Gold 5218 CPU @ 2.30GHz", 7), Isa::avx2), 32);
  const PeakSpec one_fma = lookup_peak_spec(xeon("Silver 4114 CPU @ 2.20GHz", 4));
  EXPECT_TRUE(one_fma.from_table);
  EXPECT_NE(one_fma.basis.find("Silver"), std::string::npos) << one_fma.basis;
}

TEST(PeakTable, SapphireRapidsAmxAndUnknownCpus) {
  const CpuIdentity spr = identity("GenuineIntel", 6, 0x8f, 8, "Intel(R) Xeon(R) Platinum 8480+",
                                   kZen4Flags + " amx_tile amx_bf16");
  const PeakRow& row = lookup_peak_spec(spr).row;
  EXPECT_EQ(bf16_flops_per_cycle(row, Isa::avx512, true, true), 1024);
  EXPECT_EQ(bf16_flops_per_cycle(row, Isa::avx512, true, false), 128);  // AMX capped off

  const PeakSpec unknown = lookup_peak_spec(identity("GenuineIntel", 6, 0x99, 0, "Future"));
  EXPECT_FALSE(unknown.from_table);
  EXPECT_NE(unknown.basis.find("assumption"), std::string::npos) << unknown.basis;
  EXPECT_EQ(fp32_flops_per_cycle(unknown.row, Isa::avx512), 64);  // 2 pipes, widest width
}

TEST(PeakTable, EveryRowHasASourceAndPipes) {
  for (const PeakRow& row : peak_table()) {
    EXPECT_FALSE(row.source.empty()) << row.microarchitecture;
    EXPECT_GT(row.fma_pipes, 0) << row.microarchitecture;
    EXPECT_FALSE(row.models.empty()) << row.microarchitecture;
  }
}

HostInventory fake_host(const CpuIdentity& cpu) {
  HostInventory host;
  host.cpu = cpu;
  host.cpu_model = cpu.model_name;
  for (const char* flag :
       {"avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16"})
    host.isa.emplace_back(flag);
  return host;
}

TEST(TheoreticalPeak, CountsCoresAtTheLevelInEffect) {
  const HostInventory host = fake_host(identity("AuthenticAMD", 26, 2, 1, "AMD EPYC"));
  const PeakRates full = theoretical_peak(host, 2, IsaLevel{Isa::avx512, true, "avx512"}, 3.0);
  EXPECT_DOUBLE_EQ(full.fp32_gflops, 2 * 64 * 3.0);
  EXPECT_DOUBLE_EQ(full.bf16_gflops, 2 * 128 * 3.0);
  EXPECT_NE(full.basis.find("Zen 5"), std::string::npos) << full.basis;
  EXPECT_NE(full.source.find("58455"), std::string::npos) << full.source;
  const PeakRates capped = theoretical_peak(host, 2, IsaLevel{Isa::avx2, false, "avx2"}, 3.0);
  EXPECT_DOUBLE_EQ(capped.fp32_gflops, 2 * 32 * 3.0);
  EXPECT_EQ(capped.bf16_gflops, 0);
  EXPECT_DOUBLE_EQ(theoretical_peak(host, 1.5, IsaLevel{Isa::avx512, true, ""}, 2.0).fp32_gflops,
                   1.5 * 64 * 2.0);
  const std::vector<LevelPeak> levels = fp32_peak_by_level(host, 2, 3.0);
  ASSERT_EQ(levels.size(), 3u);
  EXPECT_EQ(levels[0].isa, Isa::portable);
  EXPECT_DOUBLE_EQ(levels[0].fp32_gflops, 2 * 16 * 3.0);
  EXPECT_DOUBLE_EQ(levels[2].fp32_gflops, 2 * 64 * 3.0);
}

TEST(IsaLevel, OneDnnCapNames) {
  EXPECT_EQ(parse_onednn_isa_cap("AVX2")->isa, Isa::avx2);
  EXPECT_EQ(parse_onednn_isa_cap("avx2_vnni")->isa, Isa::avx2);
  EXPECT_EQ(parse_onednn_isa_cap("AVX512_CORE_BF16")->isa, Isa::avx512);
  EXPECT_FALSE(parse_onednn_isa_cap("AVX512_CORE_BF16")->amx);
  EXPECT_TRUE(parse_onednn_isa_cap("AVX512_CORE_AMX")->amx);
  EXPECT_TRUE(parse_onednn_isa_cap("ALL")->amx);
  EXPECT_EQ(parse_onednn_isa_cap("SSE41")->isa, Isa::portable);
  EXPECT_FALSE(parse_onednn_isa_cap("bogus").has_value());
#if defined(__aarch64__)
  // oneDNN's AArch64 names are understood there, and leave the one level, portable.
  EXPECT_EQ(parse_onednn_isa_cap("SVE_512")->isa, Isa::portable);
  EXPECT_EQ(parse_onednn_isa_cap("advanced_simd")->isa, Isa::portable);
#else
  EXPECT_FALSE(parse_onednn_isa_cap("SVE_512").has_value());
#endif
}

using testing_support::ScopedEnv;

TEST(IsaLevel, EnvironmentCapsTheProbe) {
  const ScopedEnv ours("TRAINBENCH_MAX_ISA", "portable");
  IsaLevel level;
  ASSERT_TRUE(isa_level_from_environment(false, &level).ok());
  EXPECT_EQ(level.isa, Isa::portable);
  EXPECT_NE(level.reason.find("TRAINBENCH_MAX_ISA=portable"), std::string::npos);

  // The portable probe is SSE2 mul + add (x86; NEON fmla, or SVE where the CPU has it, on
  // aarch64), exact like the FMA ones.
  const HostInventory host = read_host_inventory();
  std::unique_ptr<Plan> plan;
  ASSERT_TRUE(plan_peak(PeakOp{DType::f32, 1000}, host, 1, level, &plan).ok());
#if defined(__aarch64__)
  const std::string expected_prefix = host.arm.sve ? "sve:" : "portable:";
#else
  const std::string expected_prefix = "portable:";
#endif
  EXPECT_EQ(plan->implementation().rfind(expected_prefix, 0), 0u) << plan->implementation();
  double result = 0;
  const Buffer out{&result, sizeof(result)};
  ASSERT_TRUE(static_cast<CpuPlan&>(*plan).run(std::span<const Buffer>(&out, 1), Buffer{}).ok());
  EXPECT_EQ(result, 1000 * kPeakIncrement);
#if defined(__aarch64__)
  if (host.arm.bf16) {  // bfmmla: not an x86 level, so no cap applies
    ASSERT_TRUE(plan_peak(PeakOp{DType::bf16, 1000}, host, 1, level, &plan).ok());
    ASSERT_TRUE(static_cast<CpuPlan&>(*plan).run(std::span<const Buffer>(&out, 1), Buffer{}).ok());
    EXPECT_EQ(result, 1000 * 2 * kPeakIncrement) << plan->implementation();
  } else {
    EXPECT_EQ(plan_peak(PeakOp{DType::bf16, 1000}, host, 1, level, &plan).code(),
              StatusCode::unimplemented);
  }
#else
  EXPECT_EQ(plan_peak(PeakOp{DType::bf16, 1000}, host, 1, level, &plan).code(),
            StatusCode::unimplemented);
#endif

  const ScopedEnv bad("TRAINBENCH_MAX_ISA", "avx9000");
  EXPECT_FALSE(isa_level_from_environment(false, &level).ok());
}

TEST(IsaLevel, OneDnnCapLowersTheLevel) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "ONEDNN_MAX_CPU_ISA's values are x86 levels";
#endif
  const ScopedEnv theirs("ONEDNN_MAX_CPU_ISA", "SSE41");
  IsaLevel level;
  ASSERT_TRUE(isa_level_from_environment(true, &level).ok());
  EXPECT_EQ(level.isa, Isa::portable);
  EXPECT_NE(level.reason.find("ONEDNN_MAX_CPU_ISA=SSE41"), std::string::npos) << level.reason;
  ASSERT_TRUE(isa_level_from_environment(false, &level).ok());  // not a oneDNN backend
  Isa ours = Isa::portable;
  ASSERT_TRUE(isa_from_environment(&ours).ok());
  EXPECT_EQ(level.isa, ours);
  // A value naming no ISA, which oneDNN would ignore silently, is refused.
  const ScopedEnv garbage("ONEDNN_MAX_CPU_ISA", "garbage");
  const Status refused = isa_level_from_environment(true, &level);
  EXPECT_EQ(refused.code(), StatusCode::invalid_argument);
  EXPECT_NE(refused.message().find("ONEDNN_MAX_CPU_ISA='garbage' names no ISA"), std::string::npos)
      << refused.message();
}

// ---- Arm: the MIDR, the features and the emulation check ----

// /proc/cpuinfo of one CPU as an arm64 kernel prints it (Graviton3's features).
std::string arm_cpuinfo(const std::string& part, const std::string& features) {
  return "processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: " + features +
         "\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: " + part +
         "\nCPU revision\t: 1\n\n";
}

const std::string kGraviton3Features =
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma "
    "lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg "
    "dcpodp svei8mm svebf16 i8mm bf16 dgh rng";

TEST(ArmCpuinfo, MidrFieldsAndNames) {
  const CpuIdentity v1 = parse_cpuinfo(arm_cpuinfo("0xd40", kGraviton3Features));
  EXPECT_EQ(v1.implementer, 0x41);
  EXPECT_EQ(v1.part, 0xd40);
  EXPECT_EQ(v1.variant, 1);
  EXPECT_EQ(v1.revision, 1);
  EXPECT_EQ(v1.vendor, "ARM");
  EXPECT_EQ(v1.model_name, "ARM Neoverse V1");
  EXPECT_EQ(v1.family, -1);
  const ArmFeatures features = arm_features_from_flags(v1.flags);
  EXPECT_TRUE(features.asimd && features.sve && features.bf16 && features.i8mm);
  EXPECT_FALSE(features.sve2);
  EXPECT_EQ(features.names(),
            (std::vector<std::string>{"asimd", "sve", "bf16", "i8mm", "svebf16"}));
  // A part the names do not know keeps its number.
  const CpuIdentity other = parse_cpuinfo(
      "Features\t: fp asimd\nCPU implementer\t: 0xc0\nCPU part\t: 0xac3\nCPU revision\t: 0\n");
  EXPECT_EQ(other.vendor, "Ampere");
  EXPECT_EQ(other.model_name, "Ampere part 0xac3");
}

TEST(ArmCpuinfo, MidrRegisterFromSysfs) {
  const std::optional<Midr> grace = parse_midr("0x00000000410fd4f0\n");
  ASSERT_TRUE(grace);
  EXPECT_EQ(grace->implementer, 0x41);
  EXPECT_EQ(grace->part, 0xd4f);
  EXPECT_EQ(grace->variant, 0);
  EXPECT_EQ(grace->revision, 0);
  const std::optional<Midr> n1 = parse_midr("0x00000000413fd0c1");
  ASSERT_TRUE(n1);
  EXPECT_EQ(n1->variant, 3);
  EXPECT_EQ(n1->part, 0xd0c);
  EXPECT_EQ(n1->revision, 1);
  EXPECT_FALSE(parse_midr("not a register"));
  EXPECT_FALSE(parse_midr(""));

  // A /proc/cpuinfo without the CPU lines (some containers' LXCFS): sysfs names the CPU.
  TempDir dir("tb-arm-tree");
  const fs::path tree = dir.path();
  write(tree / "proc/cpuinfo", "processor\t: 0\nFeatures\t: fp asimd sve sve2 bf16 i8mm");
  write(tree / "sys/devices/system/cpu/online", "0");
  write(tree / "sys/devices/system/cpu/cpu0/regs/identification/midr_el1", "0x00000000410fd4f0");
  const HostInventory host = read_host_inventory(tree, std::vector<int>{0});
  EXPECT_EQ(host.cpu.implementer, 0x41);
  EXPECT_EQ(host.cpu.part, 0xd4f);
  EXPECT_EQ(host.cpu_model, "ARM Neoverse V2");
  EXPECT_TRUE(host.arm.sve2);
  EXPECT_TRUE(host.has_isa("sve2"));
  EXPECT_TRUE(host.has_isa("bf16"));
}

TEST(ArmFeatures, FromHwcapBits) {
  const ArmFeatures none = arm_features_from_hwcap(0, 0);
  EXPECT_FALSE(none.asimd || none.sve || none.sve2 || none.bf16 || none.i8mm);
  // HWCAP_ASIMD (1 << 1), HWCAP_SVE (1 << 22); HWCAP2_SVE2 (1 << 1), HWCAP2_I8MM (1 << 13),
  // HWCAP2_BF16 (1 << 14).
  const ArmFeatures v2 =
      arm_features_from_hwcap((1UL << 1) | (1UL << 22), (1UL << 1) | (1UL << 13) | (1UL << 14));
  EXPECT_TRUE(v2.asimd && v2.sve && v2.sve2 && v2.bf16 && v2.i8mm);
  EXPECT_FALSE(v2.sve_bf16);
  EXPECT_EQ(v2.source, "AT_HWCAP/AT_HWCAP2");
}

TEST(Emulation, ForeignCpuinfoOrQemuVariables) {
  const CpuIdentity x86 = identity("GenuineIntel", 6, 0x8f, 8, "Intel(R) Xeon(R) Platinum 8480+");
  const CpuIdentity arm = parse_cpuinfo(arm_cpuinfo("0xd4f", "fp asimd sve sve2"));
  EXPECT_EQ(detect_emulation("x86_64", x86, ""), "");
  EXPECT_EQ(detect_emulation("aarch64", arm, ""), "");
  const std::string qemu = detect_emulation("aarch64", x86, "");
  EXPECT_NE(qemu.find("x86 CPU"), std::string::npos) << qemu;
  EXPECT_NE(qemu.find("8480+"), std::string::npos) << qemu;
  EXPECT_NE(detect_emulation("x86_64", arm, "").find("Arm CPU"), std::string::npos);
  EXPECT_NE(detect_emulation("aarch64", arm, "QEMU_LD_PREFIX").find("QEMU_LD_PREFIX is set"),
            std::string::npos);
}

TEST(PeakTable, ArmNeoverseByPart) {
  auto arm = [](const std::string& part) {
    return parse_cpuinfo(arm_cpuinfo(part, "fp asimd sve"));
  };
  EXPECT_EQ(fp32(arm("0xd0c"), Isa::portable), 16);  // N1: 2 x 128-bit
  EXPECT_EQ(fp32(arm("0xd40"), Isa::portable), 32);  // V1: 4 x 128 (2 x 256 SVE)
  EXPECT_EQ(fp32(arm("0xd49"), Isa::portable), 16);  // N2: 2 x 128
  EXPECT_EQ(fp32(arm("0xd4f"), Isa::portable), 32);  // V2 (Grace): 4 x 128
  EXPECT_EQ(fp32(arm("0xd4f"), Isa::avx2), 0);
  const PeakSpec grace = lookup_peak_spec(arm("0xd4f"));
  EXPECT_TRUE(grace.from_table);
  EXPECT_NE(grace.basis.find("Grace"), std::string::npos) << grace.basis;
  EXPECT_NE(std::string(grace.row.source).find("Neoverse V2"), std::string::npos);
  const PeakSpec unknown = lookup_peak_spec(arm("0xd99"));
  EXPECT_FALSE(unknown.from_table);
  EXPECT_EQ(fp32_flops_per_cycle(unknown.row, Isa::portable), 16);  // assumed 2 x 128-bit
  EXPECT_NE(unknown.basis.find("implementer 0x41 part 0xd99"), std::string::npos) << unknown.basis;
}

TEST(PeakTable, ArmBf16FromBfmmlaThroughput) {
  auto bf16 = [](const std::string& part, Isa level, bool has_bf16) {
    const PeakRow& row = lookup_peak_spec(parse_cpuinfo(arm_cpuinfo(part, "fp asimd"))).row;
    return bf16_flops_per_cycle(row, level, has_bf16, false);
  };
  // 32 FLOP per 128-bit bfmmla (2x4 by 4x2: 16 multiply-adds), one a V pipe a cycle.
  EXPECT_EQ(bf16("0xd40", Isa::portable, true), 128);  // V1: 4 x 128 (2 x 256 SVE)
  EXPECT_EQ(bf16("0xd49", Isa::portable, true), 64);   // N2: 2 x 128
  EXPECT_EQ(bf16("0xd4f", Isa::portable, true), 128);  // V2 (Grace): 4 x 128
  EXPECT_EQ(bf16("0xd0c", Isa::portable, true), 0);    // N1: no BF16 in the row
  EXPECT_EQ(bf16("0xd4f", Isa::portable, false), 0);   // the CPU's flags lack bf16
  EXPECT_EQ(bf16("0xd99", Isa::portable, true), 0);    // assumed row: no sourced rate
  EXPECT_EQ(bf16("0xd4f", Isa::avx512, true), 0);      // an x86 level: nothing on Arm
  for (const PeakRow& row : peak_table()) {
    if (arm_row(row) && row.matrix_bf16_per_cycle > 0) {  // 4x the fp32 FMA rate, as the pipes
      EXPECT_EQ(row.matrix_bf16_per_cycle, 4 * fp32_flops_per_cycle(row, Isa::portable))
          << row.microarchitecture;
    }
  }
}

HostInventory arm_host(const std::string& part, std::vector<std::string> isa) {
  HostInventory host;
  host.cpu = parse_cpuinfo(arm_cpuinfo(part, "fp asimd sve sve2 bf16"));
  host.cpu_model = host.cpu.model_name;
  host.isa = std::move(isa);
  return host;
}

TEST(TheoreticalPeak, ArmCoresAtNeonWidth) {
  const HostInventory host = arm_host("0xd4f", {"asimd", "sve", "sve2", "bf16"});
  const PeakRates rates = theoretical_peak(host, 4, IsaLevel{Isa::portable, false, ""}, 3.0);
  EXPECT_DOUBLE_EQ(rates.fp32_gflops, 4 * 32 * 3.0);
  // V2's bfmmla rate, stated as the x86 bf16 figure is, and said to be unverified.
  EXPECT_DOUBLE_EQ(rates.bf16_gflops, 4 * 128 * 3.0);
  EXPECT_NE(rates.model.find("bf16: bfmmla, 4 x 128 bits/cycle x 32 FLOP"), std::string::npos)
      << rates.model;
  EXPECT_NE(rates.model.find("= 128 FLOP/cycle, theoretical, unverified on hardware"),
            std::string::npos)
      << rates.model;
  EXPECT_EQ(rates.model.find("avx"), std::string::npos) << rates.model;
  EXPECT_EQ(fp32_peak_by_level(host, 4, 3.0).size(), 1u);

  const PeakRates n1 = theoretical_peak(arm_host("0xd0c", {"asimd"}), 4, {}, 3.0);
  EXPECT_EQ(n1.bf16_gflops, 0);
  EXPECT_NE(n1.model.find("lacks BF16"), std::string::npos) << n1.model;
  const PeakRates unknown = theoretical_peak(arm_host("0xd99", {"asimd", "bf16"}), 4, {}, 3.0);
  EXPECT_EQ(unknown.bf16_gflops, 0);  // an assumed row has no sourced rate: not stated
  EXPECT_NE(unknown.model.find("not stated"), std::string::npos) << unknown.model;
}

TEST(Clock, UnderTheVectorProbeOnAllThreads) {
  const double ghz = measure_clock_under_probe(Isa::portable, 2);
  EXPECT_GT(ghz, 0.5);
  EXPECT_LT(ghz, 7.0);
}

TEST(Fingerprint, FamilyAndModelSeparateVmEpycs) {
  auto report = [](std::optional<int> family) {
    nlohmann::json host = {{"cpu_model", "AMD EPYC"},
                           {"sockets", 1},
                           {"cores", 2},
                           {"logical_cpus", 2},
                           {"memory_bytes", 0}};
    if (family)
      host["cpu_id"] = {{"vendor", "AuthenticAMD"},
                        {"family", *family},
                        {"model", 1},
                        {"stepping", 1},
                        {"microcode", "0x1"}};
    return nlohmann::json{{"host", host}, {"backends", nlohmann::json::array()}};
  };
  EXPECT_NE(machine_fingerprint(report(25)), machine_fingerprint(report(26)));
  EXPECT_NE(machine_fingerprint(report(26)).find("family 26 model 1 stepping 1"),
            std::string::npos);
  // A report from before cpu_id keeps its old fingerprint.
  EXPECT_EQ(machine_fingerprint(report(std::nullopt)).rfind("AMD EPYC |", 0), 0u);
}

}  // namespace
}  // namespace tb::cpu
