#include "backends/cpu/host_info.h"

#include <omp.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace tb::cpu {
namespace {

std::string read_first_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

int read_int(const std::filesystem::path& path, int fallback) {
  try {
    return std::stoi(read_first_line(path));
  } catch (...) {
    return fallback;
  }
}

// "48K", "4096K", "480M" as sysfs writes cache sizes.
std::uint64_t parse_size(const std::string& text) {
  if (text.empty()) return 0;
  std::uint64_t value = std::stoull(text);
  switch (text.back()) {
    case 'K':
      return value << 10;
    case 'M':
      return value << 20;
    case 'G':
      return value << 30;
    default:
      return value;
  }
}

std::uint64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> name >> kib) {
    std::getline(in, unit);
    if (name == key + ":") return kib * 1024;
  }
  return 0;
}

const char* const kInterestingIsa[] = {
    "sse4_2",   "avx",      "avx2",     "fma",         "f16c",        "avx512f",
    "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",    "asimd",       "sve"};

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

}  // namespace

const cpu_set_t& process_cpus() {
  return kProcessCpus;
}

bool HostInventory::has_isa(const std::string& flag) const {
  return std::find(isa.begin(), isa.end(), flag) != isa.end();
}

std::uint64_t HostInventory::last_level_cache_bytes() const {
  std::uint64_t best = 0;
  int best_level = 0;
  for (const CacheLevel& cache : caches)
    if (cache.type != "Instruction" && cache.level >= best_level) {
      best_level = cache.level;
      best = cache.bytes;
    }
  return best;
}

std::uint64_t memory_available_bytes() {
  return meminfo_bytes("MemAvailable");
}

HostInventory read_host_inventory() {
  namespace fs = std::filesystem;
  HostInventory inv;

  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (inv.cpu_model.empty() && (key == "model name" || key == "Model")) inv.cpu_model = value;
    if (flags.empty() && (key == "flags" || key == "Features")) {
      std::istringstream words(value);
      for (std::string word; words >> word;) flags.insert(word);
    }
  }
  for (const char* flag : kInterestingIsa)
    if (flags.count(flag)) inv.isa.emplace_back(flag);

  inv.logical_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const cpu_set_t& allowed = process_cpus();

  std::map<std::pair<int, int>, CpuCore> cores;
  std::set<int> packages;
  const fs::path cpu_root = "/sys/devices/system/cpu";
  for (int cpu = 0; cpu < inv.logical_cpus; ++cpu) {
    fs::path topo = cpu_root / ("cpu" + std::to_string(cpu)) / "topology";
    int package = read_int(topo / "physical_package_id", 0);
    int core = read_int(topo / "core_id", cpu);
    packages.insert(package);
    CpuCore& entry = cores[{package, core}];
    entry.package = package;
    entry.core = core;
    if (CPU_ISSET(cpu, &allowed)) entry.logical_cpus.push_back(cpu);
  }
  inv.sockets = static_cast<int>(packages.size());
  inv.cores = static_cast<int>(cores.size());
  for (auto& [key, core] : cores)
    if (!core.logical_cpus.empty()) inv.cores_allowed.push_back(core);

  for (int index = 0;; ++index) {
    fs::path dir = cpu_root / "cpu0/cache" / ("index" + std::to_string(index));
    if (!fs::exists(dir)) break;
    inv.caches.push_back({read_int(dir / "level", 0), read_first_line(dir / "type"),
                          parse_size(read_first_line(dir / "size"))});
  }

  inv.memory_total_bytes = meminfo_bytes("MemTotal");
  inv.memory_available_bytes = meminfo_bytes("MemAvailable");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(name[4])) ++inv.numa_nodes;
  }
  if (inv.numa_nodes == 0) inv.numa_nodes = 1;

  std::ifstream os_release("/etc/os-release");
  while (std::getline(os_release, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      inv.os = line.substr(12);
      std::erase(inv.os, '"');
    }
  utsname uts{};
  if (uname(&uts) == 0)
    inv.kernel = std::string(uts.sysname) + " " + uts.release + " " + uts.machine;
  return inv;
}

double measure_clock_ghz() {
#if defined(__x86_64__)
  // A chain of dependent 64-bit multiplies: 3 cycles each on every x86 core since Nehalem and
  // Zen. (Dependent adds of an immediate are folded by the renamer on recent Intel cores.)
  // Many short trials, keeping the fastest: on a shared machine a short window is likely to
  // run without being preempted, and a preempted one only reads low.
  constexpr std::int64_t kIterations = 20'000;  // about 0.15 ms
  constexpr double kCyclesPerIteration = 8 * 3;
  double best = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::uint64_t x = 1, one = 1;
    auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < kIterations; ++i) {
      asm volatile(
          "imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\t"
          "imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0"
          : "+r"(x)
          : "r"(one));
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, kIterations * kCyclesPerIteration / seconds / 1e9);
  }
  return best;
#else
  return 0;
#endif
}

}  // namespace tb::cpu
