#include "backends/host/host_info.h"

#include <omp.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

namespace tb::cpu {
namespace {

namespace fs = std::filesystem;

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

// The whole value as an integer, or nullopt (partial parses included).
template <typename Int>
std::optional<Int> to_integer(std::string_view text, int base = 10) {
  text = trim(text);
  Int value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string read_first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(trim(line));
}

int read_int(const fs::path& path, int fallback) {
  return to_integer<int>(read_first_line(path)).value_or(fallback);
}

// A /proc/meminfo value ("MemTotal:  16318480 kB") in bytes; 0 if absent.
std::uint64_t meminfo_bytes(const std::string& meminfo, std::string_view key) {
  std::istringstream in(meminfo);
  for (std::string line; std::getline(in, line);) {
    const std::string_view view(line);
    if (!view.starts_with(key) || view.size() <= key.size() || view[key.size()] != ':') continue;
    std::string_view value = trim(view.substr(key.size() + 1));
    const bool kib = value.ends_with("kB");
    if (kib) value = trim(value.substr(0, value.size() - 2));
    return to_integer<std::uint64_t>(value).value_or(0) * (kib ? 1024 : 1);
  }
  return 0;
}

constexpr const char* kInterestingIsa[] = {
    "sse4_2",   "avx",      "avx2",     "fma",         "f16c",        "avx512f",
    "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",    "asimd",       "asimddp",
    "asimdhp",  "sve",      "sve2",     "bf16",        "i8mm",        "svebf16"};

cpu_set_t read_process_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (omp_get_num_places() > 0) {
    // OMP_PLACES is set: libgomp has already bound this thread to the first place, so the
    // CPUs the process may use are the union of the places.
    for (int place = 0; place < omp_get_num_places(); ++place) {
      std::vector<int> ids(omp_get_place_num_procs(place));
      omp_get_place_proc_ids(place, ids.data());
      for (int id : ids) CPU_SET(id, &allowed);
    }
  } else {
    sched_getaffinity(0, sizeof(allowed), &allowed);
  }
  return allowed;
}

// Read once at load time, before any backend pins the main thread to one CPU (which would
// otherwise shrink what later backends and child processes see).
const cpu_set_t kProcessCpus = read_process_cpus();

std::vector<int> cpus_in(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

bool intersects(std::span<const int> sorted_a, std::span<const int> b) {
  for (int cpu : b)
    if (std::binary_search(sorted_a.begin(), sorted_a.end(), cpu)) return true;
  return false;
}

// ---- cgroups ----

struct CgroupMembership {
  std::string controllers;  // "" for the v2 hierarchy, "cpu,cpuacct" and the like for v1
  std::string path;         // absolute within the hierarchy
};

std::vector<CgroupMembership> parse_proc_self_cgroup(const std::string& text) {
  std::vector<CgroupMembership> memberships;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    // hierarchy-id:controller-list:path; the path itself may contain ':'.
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    memberships.push_back({line.substr(first + 1, second - first - 1), line.substr(second + 1)});
  }
  return memberships;
}

bool has_controller(const std::string& list, std::string_view controller) {
  std::istringstream in(list);
  for (std::string name; std::getline(in, name, ',');)
    if (name == controller) return true;
  return false;
}

// Limits nest: a parent's quota caps its children, so the effective limit is the tightest one
// from the process's own cgroup up to the mount root. Directories that do not exist are
// skipped, which also covers a container whose cgroup path names the host's hierarchy while
// its own cgroup is mounted at the root.
template <typename ReadLimit>
void tightest_up_the_tree(const fs::path& mount, const std::string& cgroup_path,
                          std::string_view limit_file, ReadLimit read_limit, CpuQuota* quota) {
  fs::path dir = (mount / fs::path(cgroup_path).relative_path()).lexically_normal();
  const fs::path top = mount.lexically_normal();
  for (;;) {
    const std::optional<double> cpus = read_limit(dir);
    if (cpus && (quota->cpus == 0 || *cpus < quota->cpus))
      *quota = {*cpus, (dir / limit_file).string()};
    if (dir == top || dir.string().size() <= top.string().size() || !dir.has_parent_path()) break;
    dir = dir.parent_path();
  }
}

// ---- topology and caches ----

std::vector<CacheInstance> read_cache_instances(const fs::path& cpu_root,
                                                std::span<const int> online,
                                                std::vector<CacheLevel>* first_cpu_levels) {
  std::vector<CacheInstance> instances;
  std::set<std::tuple<int, std::string, std::vector<int>>> seen;
  for (int cpu : online) {
    const fs::path cache = cpu_root / ("cpu" + std::to_string(cpu)) / "cache";
    for (int index = 0;; ++index) {
      const fs::path dir = cache / ("index" + std::to_string(index));
      if (!fs::exists(dir)) break;
      CacheInstance instance{read_int(dir / "level", 0), read_first_line(dir / "type"),
                             parse_cache_size(read_first_line(dir / "size")),
                             parse_cpu_list(read_first_line(dir / "shared_cpu_list"))};
      if (cpu == online.front())
        first_cpu_levels->push_back({instance.level, instance.type, instance.bytes});
      // Without a sharing list, assume one instance for all CPUs: counting one per CPU would
      // multiply the cache by the CPU count, and one is what sizing by cpu0 always assumed.
      if (instance.cpus.empty()) instance.cpus.assign(online.begin(), online.end());
      if (seen.emplace(instance.level, instance.type, instance.cpus).second)
        instances.push_back(std::move(instance));
    }
  }
  return instances;
}

// From /sys where the kernel lists the caches, else from CPUID (some VMs, Firecracker's among
// them, have no cache directory at all).
void read_caches(const fs::path& cpu_root, std::string_view cpuinfo, const CpuidReader& cpuid,
                 HostInventory* inv) {
  inv->cache_instances = read_cache_instances(cpu_root, inv->online_cpus, &inv->caches);
  if (!inv->cache_instances.empty()) {
    inv->cache_source = "sysfs";
    return;
  }
  const CpuidCaches from_cpuid = decode_cpuid_caches(cpuid);
  if (from_cpuid.levels.empty()) {
    inv->cache_source = "unknown";
    return;
  }
  inv->cache_source = from_cpuid.leaf;
  for (const CpuidCache& cache : from_cpuid.levels)
    inv->caches.push_back({cache.level, cache.type, cache.bytes});
  inv->cache_instances =
      cache_instances_from_cpuid(from_cpuid, inv->online_cpus, parse_apic_ids(cpuinfo));
}

void read_topology(const fs::path& cpu_root, std::span<const int> allowed, HostInventory* inv) {
  // A core is the set of hardware threads in thread_siblings_list; ordered by package and
  // core id so threads fill one socket before the next.
  struct Core {
    int package = 0, core_id = 0, threads = 0;
    std::vector<int> allowed_cpus;
  };
  std::map<int, Core> by_first_sibling;
  std::set<int> packages;
  for (int cpu : inv->online_cpus) {
    const fs::path topo = cpu_root / ("cpu" + std::to_string(cpu)) / "topology";
    std::vector<int> siblings = parse_cpu_list(read_first_line(topo / "thread_siblings_list"));
    if (siblings.empty()) siblings = {cpu};
    Core& core = by_first_sibling[siblings.front()];
    core.package = read_int(topo / "physical_package_id", 0);
    core.core_id = read_int(topo / "core_id", siblings.front());
    core.threads = static_cast<int>(siblings.size());
    packages.insert(core.package);
    if (std::binary_search(allowed.begin(), allowed.end(), cpu)) core.allowed_cpus.push_back(cpu);
  }
  std::vector<std::tuple<int, int, int>> order;
  for (const auto& [first, core] : by_first_sibling) {
    order.emplace_back(core.package, core.core_id, first);
    inv->threads_per_core = std::max(inv->threads_per_core, core.threads);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [package, core_id, first] : order) {
    const Core& core = by_first_sibling[first];
    if (!core.allowed_cpus.empty())
      inv->cores_allowed.push_back({package, core_id, core.allowed_cpus});
  }
  inv->sockets = static_cast<int>(packages.size());
  inv->cores = static_cast<int>(by_first_sibling.size());
}

std::string read_os_name(const fs::path& os_release) {
  std::istringstream in(read_text(os_release));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string name = line.substr(12);
      std::erase(name, '"');
      return name;
    }
  return "";
}

int count_numa_nodes(const fs::path& node_root) {
  int nodes = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(node_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(name[4])) ++nodes;
  }
  return std::max(nodes, 1);
}

// ---- clock ----

// One timing window: 20,000 x 8 dependent 64-bit multiplies, 3 cycles each on every x86 core
// since Nehalem and Zen, about 0.15 ms. (Dependent adds of an immediate are folded by the
// renamer on recent Intel cores, so they do not measure cycles.)
// GHz from `iterations` runs of `chain`, each `cycles` cycles of dependent work.
template <typename Chain>
double chain_ghz(std::int64_t iterations, double cycles, Chain chain) {
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < iterations; ++i) chain();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(iterations) * cycles / seconds / 1e9;
}

double multiply_chain_ghz() {
  [[maybe_unused]] std::uint64_t x = 1, one = 1;
#if defined(__x86_64__)
  return chain_ghz(20'000, 8 * 3, [&] {
    asm volatile(
        "imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\t"
        "imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0"
        : "+r"(x)
        : "r"(one));
  });
#elif defined(__aarch64__)
  // mul x, x, y: 2 cycles of latency on Neoverse N1, N2, V1 and V2 (their software
  // optimization guides); a core with another latency reads the clock off by that ratio.
  return chain_ghz(30'000, 8 * 2, [&] {
    asm volatile(
        "mul %0, %0, %1\n\tmul %0, %0, %1\n\tmul %0, %0, %1\n\tmul %0, %0, %1\n\t"
        "mul %0, %0, %1\n\tmul %0, %0, %1\n\tmul %0, %0, %1\n\tmul %0, %0, %1"
        : "+r"(x)
        : "r"(one));
  });
#else
  return 0;
#endif
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace

// ---- parsers ----

CpuIdentity parse_cpuinfo(std::string_view text) {
  CpuIdentity id;
  bool have_flags = false;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    // Every CPU repeats its block: the first value of each key describes the first CPU.
    auto first = [](std::string& field, std::string_view v) {
      if (field.empty()) field = v;
    };
    auto first_int = [](int& field, std::string_view v) {
      if (field < 0) field = to_integer<int>(v).value_or(-1);
    };
    if (key == "vendor_id") first(id.vendor, value);
    if (key == "model name" || key == "Model") first(id.model_name, value);
    if (key == "cpu family") first_int(id.family, value);
    if (key == "model") first_int(id.model, value);
    if (key == "stepping") first_int(id.stepping, value);
    if (key == "microcode") first(id.microcode, value);
    if (key == "CPU implementer" && id.implementer < 0)
      id.implementer =
          to_integer<int>(value.starts_with("0x") ? value.substr(2) : value, 16).value_or(-1);
    if (key == "CPU part" && id.part < 0)
      id.part = to_integer<int>(value.starts_with("0x") ? value.substr(2) : value, 16).value_or(-1);
    if (key == "CPU variant" && id.variant < 0)
      id.variant =
          to_integer<int>(value.starts_with("0x") ? value.substr(2) : value, 16).value_or(-1);
    if (key == "CPU revision") first_int(id.revision, value);
    if (!have_flags && (key == "flags" || key == "Features")) {
      std::istringstream words{std::string(value)};
      for (std::string word; words >> word;) id.flags.push_back(word);
      have_flags = true;
    }
  }
  if (id.implementer >= 0) name_arm_cpu(&id);
  return id;
}

std::optional<Midr> parse_midr(std::string_view text) {
  text = trim(text);
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  const std::optional<std::uint64_t> value = to_integer<std::uint64_t>(text, 16);
  if (!value) return std::nullopt;
  return Midr{static_cast<int>((*value >> 24) & 0xff), static_cast<int>((*value >> 20) & 0xf),
              static_cast<int>((*value >> 4) & 0xfff), static_cast<int>(*value & 0xf)};
}

std::string_view arm_implementer_name(int implementer) {
  switch (implementer) {
    case 0x41:
      return "ARM";
    case 0x42:
      return "Broadcom";
    case 0x48:
      return "HiSilicon";
    case 0x4e:
      return "NVIDIA";
    case 0x51:
      return "Qualcomm";
    case 0x61:
      return "Apple";
    case 0xc0:
      return "Ampere";
  }
  return "";
}

std::string_view arm_part_name(int implementer, int part) {
  if (implementer != 0x41) return "";
  switch (part) {
    case 0xd08:
      return "Cortex-A72";
    case 0xd0b:
      return "Cortex-A76";
    case 0xd0c:
      return "Neoverse N1";
    case 0xd40:
      return "Neoverse V1";
    case 0xd49:
      return "Neoverse N2";
    case 0xd4f:
      return "Neoverse V2";
    case 0xd8e:
      return "Neoverse N3";
    case 0xd84:
      return "Neoverse V3";
  }
  return "";
}

void name_arm_cpu(CpuIdentity* id) {
  if (id->vendor.empty()) {
    const std::string_view name = arm_implementer_name(id->implementer);
    id->vendor =
        name.empty() ? fmt::format("Arm implementer {:#x}", id->implementer) : std::string(name);
  }
  if (id->model_name.empty()) {
    const std::string_view part = arm_part_name(id->implementer, id->part);
    id->model_name = part.empty() ? fmt::format("{} part {:#x}", id->vendor, id->part)
                                  : fmt::format("{} {}", id->vendor, part);
  }
}

std::string detect_emulation(std::string_view binary_arch, const CpuIdentity& cpuinfo,
                             std::string_view qemu_variable) {
  const bool x86_cpuinfo =
      cpuinfo.family >= 0 || cpuinfo.vendor == "GenuineIntel" || cpuinfo.vendor == "AuthenticAMD";
  const bool arm_cpuinfo = cpuinfo.implementer >= 0;
  std::string why;
  if (binary_arch != "x86_64" && x86_cpuinfo)
    why =
        fmt::format("/proc/cpuinfo describes an x86 CPU ({}) to this {} binary (qemu-user)",
                    cpuinfo.model_name.empty() ? cpuinfo.vendor : cpuinfo.model_name, binary_arch);
  else if (binary_arch == "x86_64" && arm_cpuinfo)
    why = fmt::format("/proc/cpuinfo describes an Arm CPU ({}) to this x86_64 binary",
                      cpuinfo.model_name);
  if (!qemu_variable.empty())
    why += fmt::format("{}{} is set", why.empty() ? "" : "; ", qemu_variable);
  return why;
}

std::vector<int> parse_cpu_list(std::string_view text) {
  std::set<int> cpus;
  text = trim(text);
  while (!text.empty()) {
    const auto comma = text.find(',');
    std::string_view piece = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    int stride = 1;
    if (const auto colon = piece.find(':'); colon != std::string_view::npos) {
      stride = to_integer<int>(piece.substr(colon + 1)).value_or(0);
      piece = piece.substr(0, colon);
    }
    const auto dash = piece.find('-');
    const std::optional<int> first = to_integer<int>(piece.substr(0, dash));
    const std::optional<int> last =
        dash == std::string_view::npos ? first : to_integer<int>(piece.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first || stride <= 0) continue;
    for (int cpu = *first; cpu <= *last; cpu += stride) cpus.insert(cpu);
  }
  return {cpus.begin(), cpus.end()};
}

std::string format_cpu_list(std::span<const int> cpus) {
  std::string text;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (j > i) text += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

std::optional<double> parse_cgroup2_cpu_max(std::string_view text) {
  text = trim(text);
  const auto space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::optional<std::int64_t> quota = to_integer<std::int64_t>(text.substr(0, space));
  const std::optional<std::int64_t> period = to_integer<std::int64_t>(text.substr(space + 1));
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;  // "max": none
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

std::optional<double> parse_cgroup1_quota(std::string_view quota_text,
                                          std::string_view period_text) {
  const std::optional<std::int64_t> quota = to_integer<std::int64_t>(quota_text);
  const std::optional<std::int64_t> period = to_integer<std::int64_t>(period_text);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;  // -1: none
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

std::string parse_bracketed_choice(std::string_view text) {
  const auto open = text.find('['), close = text.find(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return std::string(trim(text));
  return std::string(text.substr(open + 1, close - open - 1));
}

std::uint64_t parse_cache_size(std::string_view text) {
  text = trim(text);
  if (text.empty()) return 0;
  int shift = 0;
  switch (text.back()) {
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    default:
      break;
  }
  if (shift) text.remove_suffix(1);
  return to_integer<std::uint64_t>(text).value_or(0) << shift;
}

// ---- readers ----

CpuQuota read_cpu_quota(const fs::path& root) {
  const fs::path mount = root / "sys/fs/cgroup";
  CpuQuota quota;
  for (const CgroupMembership& group :
       parse_proc_self_cgroup(read_text(root / "proc/self/cgroup"))) {
    if (group.controllers.empty()) {
      tightest_up_the_tree(
          mount, group.path, "cpu.max",
          [](const fs::path& dir) {
            return parse_cgroup2_cpu_max(read_first_line(dir / "cpu.max"));
          },
          &quota);
    } else if (has_controller(group.controllers, "cpu")) {
      // v1 mounts the controller at its own name ("cpu,cpuacct"), often with a "cpu" link.
      for (const std::string& name : {group.controllers, std::string("cpu")}) {
        if (!fs::exists(mount / name)) continue;
        tightest_up_the_tree(
            mount / name, group.path, "cpu.cfs_quota_us",
            [](const fs::path& dir) {
              return parse_cgroup1_quota(read_first_line(dir / "cpu.cfs_quota_us"),
                                         read_first_line(dir / "cpu.cfs_period_us"));
            },
            &quota);
        break;
      }
    }
  }
  return quota;
}

const cpu_set_t& process_cpus() {
  return kProcessCpus;
}

std::vector<int> process_cpu_list() {
  return cpus_in(kProcessCpus);
}

bool HostInventory::has_isa(const std::string& flag) const {
  return std::find(isa.begin(), isa.end(), flag) != isa.end();
}

std::vector<int> HostInventory::allowed_cpus() const {
  std::vector<int> cpus;
  for (const CpuCore& core : cores_allowed)
    cpus.insert(cpus.end(), core.logical_cpus.begin(), core.logical_cpus.end());
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

int HostInventory::last_level() const {
  int level = 0;
  for (const CacheInstance& cache : cache_instances)
    if (cache.type != "Instruction") level = std::max(level, cache.level);
  return level;
}

std::uint64_t HostInventory::last_level_cache_bytes(std::span<const int> cpus) const {
  const int level = last_level();
  std::uint64_t sum = 0, largest = 0;
  for (const CacheInstance& cache : cache_instances) {
    if (cache.level != level || cache.type == "Instruction") continue;
    largest = std::max(largest, cache.bytes);
    if (intersects(cache.cpus, cpus)) sum += cache.bytes;
  }
  // No CPU given (or none the caches list): one instance, as cpu0's cache would say.
  return sum > 0 ? sum : largest;
}

int HostInventory::last_level_cache_instances(std::span<const int> cpus) const {
  const int level = last_level();
  int count = 0;
  for (const CacheInstance& cache : cache_instances)
    if (cache.level == level && cache.type != "Instruction" && intersects(cache.cpus, cpus))
      ++count;
  return count;
}

std::uint64_t HostInventory::last_level_cache_bytes() const {
  return last_level_cache_bytes(allowed_cpus());
}

std::uint64_t HostInventory::last_level_cache_bytes_for_sizing(std::span<const int> cpus) const {
  const std::uint64_t bytes = last_level_cache_bytes(cpus);
  return bytes > 0 ? bytes : kAssumedLastLevelCacheBytes;
}

std::uint64_t memory_available_bytes() {
  return meminfo_bytes(read_text("/proc/meminfo"), "MemAvailable");
}

ResidentMemory resident_memory() {
  const std::string status = read_text("/proc/self/status");
  return {meminfo_bytes(status, "VmRSS"), meminfo_bytes(status, "VmHWM")};
}

bool reset_resident_peak() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  return static_cast<bool>(clear_refs << "5" << std::flush);
}

namespace {

constexpr std::string_view kBinaryArch =
#if defined(__x86_64__)
    "x86_64";
#elif defined(__aarch64__)
    "aarch64";
#else
    "other";
#endif

std::string qemu_variable() {
  for (char** variable = environ; variable && *variable; ++variable)
    if (std::string_view(*variable).starts_with("QEMU_")) {
      const std::string_view entry(*variable);
      return std::string(entry.substr(0, entry.find('=')));
    }
  return "";
}

}  // namespace

HostInventory read_host_inventory() {
  return read_host_inventory(process_cpu_list());
}

HostInventory read_host_inventory(std::span<const int> allowed_cpus) {
  HostInventory inv = read_host_inventory("/", allowed_cpus, host_cpuid);
  inv.emulation = detect_emulation(kBinaryArch, inv.cpu, qemu_variable());
#if defined(__aarch64__)
  // The kernel's (or the emulator's) feature bits are what this process may execute.
  inv.arm = host_arm_features();
  if (inv.cpu.implementer < 0) {
    // Another architecture's /proc/cpuinfo (qemu-user's host): none of it describes this CPU.
    const std::string host_cpu = inv.cpu.model_name;
    inv.cpu = CpuIdentity{};
    inv.cpu.model_name = host_cpu.empty()
                             ? "unknown aarch64 CPU"
                             : fmt::format("unknown aarch64 CPU (emulated on {})", host_cpu);
    inv.cpu_model = inv.cpu.model_name;
    inv.isa.clear();
  }
  for (const std::string& name : inv.arm.names())
    if (!inv.has_isa(name)) inv.isa.push_back(name);
  if (inv.cpu.flags.empty()) inv.cpu.flags = inv.isa;
#endif
  return inv;
}

HostInventory read_host_inventory(const fs::path& root, std::span<const int> allowed_cpus,
                                  const CpuidReader& cpuid) {
  HostInventory inv;
  const std::string cpuinfo = read_text(root / "proc/cpuinfo");
  inv.cpu = parse_cpuinfo(cpuinfo);
  if (inv.cpu.implementer < 0 && inv.cpu.family < 0) {
    // An Arm /proc/cpuinfo without the MIDR lines: sysfs has the register itself.
    if (const std::optional<Midr> midr = parse_midr(
            read_first_line(root / "sys/devices/system/cpu/cpu0/regs/identification/midr_el1"))) {
      inv.cpu.implementer = midr->implementer;
      inv.cpu.part = midr->part;
      inv.cpu.variant = midr->variant;
      inv.cpu.revision = midr->revision;
      name_arm_cpu(&inv.cpu);
    }
  }
  inv.cpu_model = inv.cpu.model_name;
  if (inv.cpu.implementer >= 0) inv.arm = arm_features_from_flags(inv.cpu.flags);
  for (const char* flag : kInterestingIsa)
    if (std::find(inv.cpu.flags.begin(), inv.cpu.flags.end(), flag) != inv.cpu.flags.end())
      inv.isa.emplace_back(flag);

  const fs::path cpu_root = root / "sys/devices/system/cpu";
  inv.online_cpus = parse_cpu_list(read_first_line(cpu_root / "online"));
  if (inv.online_cpus.empty())  // no sysfs: CPUs 0..n-1
    for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); ++cpu)
      inv.online_cpus.push_back(static_cast<int>(cpu));
  inv.logical_cpus = static_cast<int>(inv.online_cpus.size());
  std::vector<int> allowed(allowed_cpus.begin(), allowed_cpus.end());
  std::sort(allowed.begin(), allowed.end());
  read_topology(cpu_root, allowed, &inv);
  read_caches(cpu_root, cpuinfo, cpuid, &inv);

  const std::string meminfo = read_text(root / "proc/meminfo");
  inv.memory_total_bytes = meminfo_bytes(meminfo, "MemTotal");
  inv.memory_available_bytes = meminfo_bytes(meminfo, "MemAvailable");
  inv.numa_nodes = count_numa_nodes(root / "sys/devices/system/node");
  inv.cpu_quota = read_cpu_quota(root);

  const fs::path thp = root / "sys/kernel/mm/transparent_hugepage";
  if (fs::exists(thp / "enabled"))
    inv.transparent_hugepages = parse_bracketed_choice(read_first_line(thp / "enabled"));
  inv.huge_page_bytes = to_integer<std::uint64_t>(read_first_line(thp / "hpage_pmd_size"))
                            .value_or(meminfo_bytes(meminfo, "Hugepagesize"));

  inv.os = read_os_name(root / "etc/os-release");
  utsname uts{};
  if (uname(&uts) == 0)
    inv.kernel = std::string(uts.sysname) + " " + uts.release + " " + uts.machine;
  return inv;
}

// The clock that matters for a peak is the one the cores hold while every one of them runs
// vector code: AVX-512 licences (Intel) and the package power limit (everyone) lower it below
// what one busy core among idle ones reaches. A vector-throughput loop cannot measure it (its
// rate per cycle is what is being estimated), and an FMA latency chain is not the same number
// of cycles on every microarchitecture, so the cycles come from an integer multiply chain
// (3 cycles on every x86 core since Nehalem and Zen) in windows of about 0.15 ms, each right
// after `load` (about 1 ms of vector code) on every thread at once. The frequency controllers
// react on a millisecond scale (Intel holds a licence about 2 ms after the last wide
// instruction), so a window this short sees the loaded frequency, and the vector units are
// busy about 85% of the time. Interleaving the chain with FMAs instead would let the FMAs
// delay the chain on cores that issue both from one port (imul and FMA share port 1 on
// Skylake), reading the clock low. Each thread keeps its fastest window (a preempted window
// only reads low); the figure is the median over threads.
double measure_clock_ghz(int threads, void (*load)()) {
  threads = std::max(threads, 1);
  constexpr int kWarmUpBursts = 100;  // ~0.1 s: licence and power state settle first
  const int trials = load ? 60 : 300;
  std::vector<double> fastest(threads, 0);
#pragma omp parallel num_threads(threads)
  {
    const int thread = omp_get_thread_num();
    if (load)
      for (int burst = 0; burst < kWarmUpBursts; ++burst) load();
    for (int trial = 0; trial < trials; ++trial) {
      if (load) {
        // Every thread starts its burst together, so all windows fall while all cores are
        // loaded.
#pragma omp barrier
        load();
      }
      fastest[thread] = std::max(fastest[thread], multiply_chain_ghz());
    }
  }
  return median(fastest);
}

}  // namespace tb::cpu
