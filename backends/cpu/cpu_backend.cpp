#include "backends/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/cpu_kernels/stream.h"
#include "backends/host/energy.h"
#include "backends/host/peak.h"
#include "backends/overloaded.h"
#include "backends/periodic_monitor.h"
#include "backends/reference/reference_products.h"

namespace tb::cpu {
namespace {

// The huge page a buffer of `bytes` is meant to be backed by: the kernel's transparent huge
// page size when THP is on (always or madvise) and the buffer spans at least one; 0 for
// ordinary pages. Small buffers stay on small pages: rounding them to a huge page (512 MiB
// with 64 KiB base pages on arm64) would waste memory for no TLB gain.
std::size_t huge_page_for(const HostInventory& host, std::size_t bytes) {
  const bool thp =
      host.transparent_hugepages == "always" || host.transparent_hugepages == "madvise";
  return thp && host.huge_page_bytes > 0 && bytes >= host.huge_page_bytes ? host.huge_page_bytes
                                                                          : 0;
}

std::size_t system_page() {
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// What allocate maps for `bytes` and release unmaps: whole huge pages, or whole pages.
std::size_t mapped_size(const HostInventory& host, std::size_t bytes) {
  const std::size_t huge = huge_page_for(host, bytes);
  const std::size_t unit = huge ? huge : system_page();
  return (std::max<std::size_t>(bytes, 1) + unit - 1) / unit * unit;
}

// mmap aligns to the base page only; a huge page can back just the huge-page-aligned stretches
// of a mapping, so over-map by one huge page and trim both ends to an aligned start.
void* map_aligned(std::size_t size, std::size_t alignment) {
  const std::size_t span = alignment ? size + alignment : size;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED || !alignment) return raw;
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t start = (begin + alignment - 1) / alignment * alignment;
  if (start > begin) munmap(raw, start - begin);
  const std::size_t tail = begin + span - (start + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(start + size), tail);
  return reinterpret_cast<void*>(start);
}

IsaLevel isa_level_or_throw(bool onednn_isa_cap) {
  IsaLevel level;
  const Status status = isa_level_from_environment(onednn_isa_cap, &level);
  if (!status.ok()) throw UsageError(status.message());
  return level;
}

double gib(std::uint64_t bytes) {
  return static_cast<double>(bytes) / (1 << 30);
}

}  // namespace

CpuBackend::CpuBackend(std::string name, const BackendConfig& config, bool onednn_isa_cap)
    : name_(std::move(name)),
      host_(config.cpus.empty() ? read_host_inventory() : read_host_inventory(config.cpus)),
      placement_(configure_threads(config, host_)),
      isa_level_(isa_level_or_throw(onednn_isa_cap)),
      clock_ghz_(measure_clock_under_probe(isa_level_.isa, placement_.threads)) {}

std::vector<int> CpuBackend::cpus_used() const {
  std::vector<int> cpus = placement_.affinity;
  if (cpus.empty() || std::find(cpus.begin(), cpus.end(), -1) != cpus.end())
    return host_.allowed_cpus();
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

DeviceInfo CpuBackend::device_info() const {
  DeviceInfo info;
  info.kind = "cpu";
  info.model = host_.cpu_model;
  info.sockets = host_.sockets;
  info.cores = host_.cores;
  info.logical_cpus = host_.logical_cpus;
  info.threads_used = placement_.threads;
  info.affinity = placement_.affinity;
  info.memory_bytes = host_.memory_total_bytes;
  info.numa_nodes = host_.numa_nodes;
  info.isa = host_.isa;
  info.clock_ghz = clock_ghz_;
  info.details["clock_method"] = clock_method(isa_level_.isa, placement_.threads);
  info.details["isa_level"] = isa_level_.reason;

  // FMA pipes belong to cores, not threads; a cgroup quota below the cores used allows only
  // that many cores' worth of time.
  const double quota = host_.cpu_quota.cpus;
  const double cores = quota > 0 ? std::min<double>(placement_.cores_used, quota)
                                 : static_cast<double>(placement_.cores_used);
  info.details["cores_used"] = placement_.cores_used;
  if (quota > 0 && quota < placement_.cores_used)
    info.details["cores_counted"] = fmt::format("{:g}: the cgroup CPU quota", cores);
  if (!placement_.note.empty()) info.details["threads_note"] = placement_.note;

  const PeakRates rates = theoretical_peak(host_, cores, isa_level_, clock_ghz_);
  info.theoretical_fp32_gflops = rates.fp32_gflops;
  info.theoretical_bf16_gflops = rates.bf16_gflops;
  info.details["peak_model"] = rates.model;
  info.details["peak_basis"] = rates.basis;
  info.details["peak_source"] = rates.source;
  nlohmann::json by_level = nlohmann::json::object();
  for (const LevelPeak& level : fp32_peak_by_level(host_, cores, clock_ghz_))
    by_level[std::string(isa_name(level.isa))] = {{"gflops", level.fp32_gflops},
                                                  {"per_core", level.formula}};
  info.details["fp32_theoretical_by_isa"] = by_level;  // all at the clock measured above

  const std::vector<int> cpus = cpus_used();
  // What cache-dependent sizes (STREAM's arrays) use; the source says where it came from.
  info.details["last_level_cache_bytes"] = host_.last_level_cache_bytes_for_sizing(cpus);
  info.details["last_level_cache_source"] =
      host_.cache_source == "unknown"
          ? fmt::format("unknown: {} MiB assumed", kAssumedLastLevelCacheBytes >> 20)
          : host_.cache_source;
  info.details["last_level_cache_instances"] = host_.last_level_cache_instances(cpus);
  info.details["transparent_hugepages"] = host_.transparent_hugepages;
  info.details["huge_page_bytes"] = host_.huge_page_bytes;
  return info;
}

Status CpuBackend::allocate(std::size_t bytes, Buffer* out) {
  const std::uint64_t available = memory_available_bytes();
  if (bytes > available)
    return Status::OutOfMemory(fmt::format(
        "needs {:.2f} GiB but only {:.2f} GiB of memory is available", gib(bytes), gib(available)));
  const std::size_t huge = huge_page_for(host_, bytes);
  const std::size_t size = mapped_size(host_, bytes);
  void* data = map_aligned(size, huge);
  if (data == MAP_FAILED)
    return Status::OutOfMemory(
        fmt::format("cannot map {:.2f} GiB: {}", gib(size), std::strerror(errno)));
  if (huge) madvise(data, size, MADV_HUGEPAGE);  // fewer page faults and TLB misses; a hint only
  allocations_.add(size);
  // First touch by the computing threads, with the static partition the kernels use.
  const std::int64_t pages = static_cast<std::int64_t>(size / kHostPage);
#pragma omp parallel for schedule(static)
  for (std::int64_t page = 0; page < pages; ++page) static_cast<char*>(data)[page * kHostPage] = 0;
  *out = Buffer{data, bytes};
  return Status::Ok();
}

Status CpuBackend::allocate_host(std::size_t bytes, bool pinned, Buffer* out) {
  TB_RETURN_IF_ERROR(allocate(bytes, out));
  out->kind = pinned ? MemoryKind::host_pinned : MemoryKind::host_pageable;
  return Status::Ok();
}

CpuBackend::~CpuBackend() {
  release(flush_buffer_);
}

Status CpuBackend::flush_caches() {
  if (!flush_buffer_.data) {
    // Twice the last-level caches the threads use, summed over their instances: each thread
    // writes its static share through its own L3, so every instance sees about twice its
    // size. Capped at 1 GiB or 1/16 of memory, whichever is more: a VM may report its host's
    // whole L3.
    const std::uint64_t cap = std::max<std::uint64_t>(1u << 30, host_.memory_total_bytes / 16);
    const std::size_t bytes = std::clamp<std::uint64_t>(
        2 * host_.last_level_cache_bytes_for_sizing(cpus_used()), 64u << 20, cap);
    TB_RETURN_IF_ERROR(allocate(bytes, &flush_buffer_));
  }
  auto* data = static_cast<std::uint64_t*>(flush_buffer_.data);
  const std::int64_t count = static_cast<std::int64_t>(flush_buffer_.bytes / sizeof(std::uint64_t));
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) data[i] += 1;
  return Status::Ok();
}

void CpuBackend::release(Buffer buffer) {
  if (!buffer.data) return;
  munmap(buffer.data, mapped_size(host_, buffer.bytes));
  allocations_.remove(mapped_size(host_, buffer.bytes));
}

std::unique_ptr<TelemetryMonitor> CpuBackend::start_telemetry() {
  EnergyCounters counters = find_energy_counters(powercap_root());
  // No zone to read (most virtual machines): no sampling thread beside the timed runs.
  if (counters.zones.empty()) return unread_telemetry("powercap", counters.unavailable);
  auto window = std::make_shared<EnergyWindow>(std::move(counters));
  return periodic_monitor([window] { window->read(); },
                          [window](double seconds) { return window->summarize(seconds); }, 0.25);
}

// Beyond the computed footprint: the flush buffer where one was made, and 256 MiB for what the
// libraries keep themselves (JIT-generated kernels, primitive caches, OpenMP thread stacks).
std::optional<MemoryUse> CpuBackend::memory_use() const {
  constexpr std::uint64_t kLibraryAllowance = 256ull << 20;
  const std::uint64_t flush = flush_buffer_.data ? mapped_size(host_, flush_buffer_.bytes) : 0;
  return MemoryUse{.allocated_bytes = allocations_.held(),
                   .allocated_peak_bytes = allocations_.peak(),
                   .device_free_bytes = std::nullopt,
                   .allowance_bytes = kLibraryAllowance + flush};
}

Status CpuBackend::upload(const void* host, Buffer device, std::size_t bytes) {
  if (bytes > device.bytes) return Status::InvalidArgument("upload larger than the buffer");
  parallel_copy(device.data, host, bytes);
  return Status::Ok();
}

Status CpuBackend::download(Buffer device, void* host, std::size_t bytes) {
  if (bytes > device.bytes) return Status::InvalidArgument("download larger than the buffer");
  parallel_copy(host, device.data, bytes);
  return Status::Ok();
}

std::unique_ptr<Timer> CpuBackend::make_timer() {
  return make_host_timer();
}

Status CpuBackend::plan(const OpDesc& op, std::unique_ptr<Plan>* out) {
  return std::visit(
      Overloaded{[&](const StreamOp& stream) { return plan_stream(stream, out); },
                 [&](const PeakOp& peak) {
                   return plan_peak(peak, host_, placement_.threads, isa_level_, out);
                 },
                 [&](const TransferOp&) {
                   return Status::Unimplemented(
                       fmt::format("{}: no transfers, host memory is the device's memory", name_));
                 },
                 [&](const auto&) { return plan_host_op(op, out); }},
      op);
}

Status CpuBackend::import_operand(const Plan& plan, int index, const void* plain_host,
                                  Buffer device) {
  return static_cast<const CpuPlan&>(plan).import_operand(index, plain_host, device);
}

Status CpuBackend::export_operand(const Plan& plan, int index, Buffer device, void* plain_host) {
  return static_cast<const CpuPlan&>(plan).export_operand(index, device, plain_host);
}

Status CpuBackend::gather_operand(const Plan& plan, int index, Buffer device,
                                  std::span<const std::int64_t> positions, void* values) {
  return static_cast<const CpuPlan&>(plan).gather_operand(index, device, positions, values);
}

Status CpuBackend::execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) {
  auto& cpu_plan = static_cast<CpuPlan&>(plan);
  if (operands.size() != cpu_plan.operands().size())
    return Status::InvalidArgument(
        fmt::format("plan takes {} operands, got {}", cpu_plan.operands().size(), operands.size()));
  for (std::size_t i = 0; i < operands.size(); ++i)
    if (operands[i].bytes < cpu_plan.operands()[i].bytes)
      return Status::InvalidArgument(fmt::format("operand '{}' needs {} bytes, got {}",
                                                 cpu_plan.operands()[i].name,
                                                 cpu_plan.operands()[i].bytes, operands[i].bytes));
  if (workspace.bytes < cpu_plan.workspace_bytes())
    return Status::InvalidArgument("workspace smaller than the plan needs");
  return cpu_plan.run(operands, workspace);
}

}  // namespace tb::cpu
