#include "bench/inventory.h"

#include <gnu/libc-version.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include <fmt/format.h>
#include <CLI/Version.hpp>

#include "backends/host/host_info.h"
#include "bench/build_info.h"
#include "workloads/registry.h"

extern char** environ;

namespace tb {

std::map<std::string, std::string> result_affecting_environment() {
  static constexpr std::string_view kPrefixes[] = {"OMP_",      "GOMP_", "KMP_",  "OPENBLAS_",
                                                   "ONEDNN_",   "DNNL_", "CUDA_", "MKL_",
                                                   "OMPI_MCA_", "UCX_",  "NCCL_"};
  // What mpirun sets for its own bookkeeping (addresses, session directories, ids) is not a
  // setting: it differs at every launch.
  static constexpr std::string_view kLauncherInternal[] = {"OMPI_MCA_orte_", "OMPI_MCA_ess",
                                                           "OMPI_MCA_pmix", "OMPI_MCA_initial_wdir",
                                                           "OMPI_MCA_shmem_RUNTIME_QUERY_hint"};
  static constexpr std::string_view kNames[] = {
      "NVIDIA_TF32_OVERRIDE", "LD_PRELOAD", "MALLOC_CONF", "GOTO_NUM_THREADS", "TRAINBENCH_MAX_ISA",
      "ATEN_CPU_CAPABILITY",
      // Slurm's job geometry: how many nodes, tasks and CPUs per task, and how they are bound.
      "SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
      "SLURM_CPUS_PER_TASK", "SLURM_CPU_BIND", "SLURM_DISTRIBUTION", "SLURM_STEP_NUM_NODES",
      "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE", "SLURM_GPUS_PER_NODE"};
  std::map<std::string, std::string> found;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string_view text(*entry);
    const auto eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = text.substr(0, eq);
    bool keep = std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
    for (std::string_view prefix : kPrefixes) keep = keep || name.starts_with(prefix);
    for (std::string_view prefix : kLauncherInternal) keep = keep && !name.starts_with(prefix);
    if (keep) found.emplace(name, text.substr(eq + 1));
  }
  return found;
}

nlohmann::json host_inventory_json() {
  const cpu::HostInventory host = cpu::read_host_inventory();
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  nlohmann::json caches = nlohmann::json::array();
  for (const cpu::CacheLevel& cache : host.caches)
    caches.push_back({{"level", cache.level}, {"type", cache.type}, {"bytes", cache.bytes}});
  nlohmann::json libraries = nlohmann::json::array({
      {{"name", "glibc"}, {"version", gnu_get_libc_version()}},
      {{"name", "OpenMP"}, {"version", fmt::format("{} (libgomp)", _OPENMP)}},
      {{"name", "fmt"},
       {"version",
        fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100)}},
      {{"name", "nlohmann_json"},
       {"version", fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                               NLOHMANN_JSON_VERSION_PATCH)}},
      {{"name", "CLI11"}, {"version", CLI11_VERSION}},
      {{"name", "Google Benchmark"}, {"version", TRAINBENCH_BENCHMARK_VERSION}},
  });
  // x86 family / model / stepping name the microarchitecture where `model name` does not (a
  // VM's "AMD EPYC"); microcode changes results (mitigations) without changing the machine.
  auto known = [](int value) { return value < 0 ? nlohmann::json() : nlohmann::json(value); };
  nlohmann::json cpu_id = {{"vendor", host.cpu.vendor},
                           {"family", known(host.cpu.family)},
                           {"model", known(host.cpu.model)},
                           {"stepping", known(host.cpu.stepping)},
                           {"microcode", host.cpu.microcode}};
  if (host.cpu.implementer >= 0) {  // Arm: the MIDR names the core
    cpu_id["implementer"] = fmt::format("{:#x}", host.cpu.implementer);
    cpu_id["part"] = fmt::format("{:#x}", host.cpu.part);
    cpu_id["variant"] = host.cpu.variant;
    cpu_id["revision"] = host.cpu.revision;
  }
  const std::vector<int> allowed = host.allowed_cpus();
  // bytes null where neither /sys nor CPUID gave a size; sized_as is what sizing then used.
  const std::uint64_t llc_bytes = host.last_level_cache_bytes(allowed);
  const nlohmann::json last_level_cache = {
      {"level", host.last_level()},
      {"instances", host.last_level_cache_instances(allowed)},
      {"bytes", llc_bytes > 0 ? nlohmann::json(llc_bytes) : nlohmann::json()},
      {"sized_as", host.last_level_cache_bytes_for_sizing(allowed)},
      {"source", host.cache_source},
      {"over", "the distinct instances serving the CPUs this process may use"}};
  const nlohmann::json cpu_quota =
      host.cpu_quota.cpus > 0
          ? nlohmann::json{{"cpus", host.cpu_quota.cpus}, {"source", host.cpu_quota.source}}
          : nlohmann::json();
  nlohmann::json inventory = {{"hostname", hostname},
                              {"cpu_model", host.cpu_model},
                              {"cpu_id", cpu_id},
                              {"online_cpus", cpu::format_cpu_list(host.online_cpus)},
                              {"allowed_cpus", cpu::format_cpu_list(allowed)},
                              {"threads_per_core", host.threads_per_core},
                              {"last_level_cache", last_level_cache},
                              {"cpu_quota", cpu_quota},
                              {"transparent_hugepages", host.transparent_hugepages},
                              {"huge_page_bytes", host.huge_page_bytes},
                              {"sockets", host.sockets},
                              {"cores", host.cores},
                              {"logical_cpus", host.logical_cpus},
                              {"memory_bytes", host.memory_total_bytes},
                              {"numa_nodes", host.numa_nodes},
                              {"isa", host.isa},
                              {"caches", caches},
                              {"os", host.os},
                              {"kernel", host.kernel},
                              {"compiler", TRAINBENCH_COMPILER},
                              {"libraries", libraries},
                              {"environment", result_affecting_environment()}};
  if (host.arm.sve_vector_bits > 0) inventory["sve_vector_bits"] = host.arm.sve_vector_bits;
  // Under an emulator (qemu-user) every time is the emulator's: said in every report.
  inventory["emulation"] =
      host.emulation.empty()
          ? nlohmann::json()
          : nlohmann::json(fmt::format("emulated: timings meaningless ({})", host.emulation));
  return inventory;
}

nlohmann::json tool_json() {
  return {{"name", "trainbench"},
          {"version", TRAINBENCH_VERSION},
          {"git_commit", TRAINBENCH_GIT_COMMIT},
          {"build_type", TRAINBENCH_BUILD_TYPE}};
}

std::map<std::string, PeakRate> measure_peaks(Backend& backend, const HarnessConfig& harness) {
  const DeviceInfo device = backend.device_info();
  std::map<std::string, PeakRate> peaks;
  // A GPU also has TF32 and f16 Tensor Core rates; their quoted figures are in its details.
  const std::vector<DType> dtypes =
      device.kind == "gpu" ? std::vector{DType::f32, DType::tf32, DType::bf16, DType::f16}
                           : std::vector{DType::f32, DType::bf16};
  const nlohmann::json& datasheet = device.details.contains("datasheet_gflops")
                                        ? device.details["datasheet_gflops"]
                                        : nlohmann::json::object();
  for (DType dtype : dtypes) {
    const std::string name(dtype_name(dtype));
    PeakRate& rate = peaks[name];
    const double theoretical = dtype == DType::f32    ? device.theoretical_fp32_gflops
                               : dtype == DType::bf16 ? device.theoretical_bf16_gflops
                                                      : datasheet.value(name, 0.0);
    if (theoretical > 0) rate.theoretical_gflops = theoretical;
    Descriptor descriptor("peak");
    descriptor.set("dtype", name);
    std::unique_ptr<Workload> probe = create_workload(descriptor, {});
    Status status = probe->setup(backend, 0);
    if (status.ok()) {
      const Validation validation = probe->validate();
      if (!validation.passed)
        status = Status::Failed("peak probe failed validation: " + validation.message);
    }
    Measurement measurement;
    if (status.ok()) status = measure(*probe, backend, harness, &measurement);
    if (!status.ok()) {
      rate.reason = status.message();
      continue;
    }
    // A ceiling is the best the probe reached: its fastest sample.
    const double fastest =
        *std::min_element(measurement.samples_s.begin(), measurement.samples_s.end());
    const double reached = probe->counts().flops / fastest / 1e9;
    if (const auto below = device.probe_below_ceiling.find(name);
        below != device.probe_below_ceiling.end()) {
      rate.probe_gflops = reached;
      rate.reason = below->second;
      continue;
    }
    rate.measured_gflops = reached;
  }
  return peaks;
}

nlohmann::json peaks_json(const std::map<std::string, PeakRate>& peaks) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [dtype, rate] : peaks) {
    nlohmann::json entry = {{"measured_gflops", nullptr}, {"theoretical_gflops", nullptr}};
    if (rate.measured_gflops) entry["measured_gflops"] = *rate.measured_gflops;
    if (rate.theoretical_gflops) entry["theoretical_gflops"] = *rate.theoretical_gflops;
    if (rate.probe_gflops) entry["probe_gflops"] = *rate.probe_gflops;
    if (!rate.reason.empty()) entry["reason"] = rate.reason;
    out[dtype] = entry;
  }
  return out;
}

std::map<std::string, PeakRate> peaks_from_json(const nlohmann::json& peaks) {
  std::map<std::string, PeakRate> out;
  for (const auto& [dtype, entry] : peaks.items()) {
    PeakRate& rate = out[dtype];
    if (entry.value("measured_gflops", nlohmann::json()).is_number())
      rate.measured_gflops = entry["measured_gflops"].get<double>();
    if (entry.value("theoretical_gflops", nlohmann::json()).is_number())
      rate.theoretical_gflops = entry["theoretical_gflops"].get<double>();
    if (entry.value("probe_gflops", nlohmann::json()).is_number())
      rate.probe_gflops = entry["probe_gflops"].get<double>();
    rate.reason = entry.value("reason", "");
  }
  return out;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace tb
