// The CPU backend base: host memory (allocated once, first touched by the computing threads),
// the OpenMP thread placement, host-clock timing, and the STREAM and peak probes. A library
// backend derives from CpuBackend and plans its own ops, deferring the rest here (the shared
// CPU kernels, backends/cpu_kernels/).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "backends/backend.h"
#include "backends/communicator.h"
#include "backends/host/host_info.h"
#include "backends/host/host_plan.h"
#include "backends/host/peak.h"
#include "backends/host/threading.h"
#include "backends/registry.h"

namespace tb::cpu {

class CpuBackend : public Backend {
 public:
  // `onednn_isa_cap`: ONEDNN_MAX_CPU_ISA also caps the ISA level the peak probes and the
  // theoretical peak use, as it caps the library's kernels (oneDNN backends pass true).
  // Throws UsageError for a bad thread count or TRAINBENCH_MAX_ISA.
  CpuBackend(std::string name, const BackendConfig& config, bool onednn_isa_cap = false);
  ~CpuBackend() override;

  std::string name() const override { return name_; }
  DeviceInfo device_info() const override;
  Status allocate(std::size_t bytes, Buffer* out) override;
  // Host memory is the device's memory here: the same allocation, tagged with its kind.
  Status allocate_host(std::size_t bytes, bool pinned, Buffer* out) override;
  void release(Buffer buffer) override;
  Status upload(const void* host, Buffer device, std::size_t bytes) override;
  Status download(Buffer device, void* host, std::size_t bytes) override;
  void synchronize() override {}
  Status flush_caches() override;
  // MPI on host memory (the World's own), for every CPU backend alike.
  Status make_communicator(World& world, std::unique_ptr<Communicator>* out) override {
    *out = world.host_communicator();
    return Status::Ok();
  }
  std::unique_ptr<Timer> make_timer() override;
  // The package (and DRAM) energy counters of Linux's powercap interface, read every 0.25 s;
  // where none is readable, a monitor that reads nothing and says why.
  std::unique_ptr<TelemetryMonitor> start_telemetry() override;
  std::optional<MemoryUse> memory_use() const override;
  void reset_memory_peak() override { allocations_.reset_peak(); }

  // Plans the shared CPU ops (stream, peak); everything else is unimplemented here.
  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override;
  Status import_operand(const Plan& plan, int index, const void* plain_host,
                        Buffer device) override;
  Status export_operand(const Plan& plan, int index, Buffer device, void* plain_host) override;
  Status gather_operand(const Plan& plan, int index, Buffer device,
                        std::span<const std::int64_t> positions, void* values) override;
  Status execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) override;

  const HostInventory& host() const { return host_; }
  const ThreadPlacement& placement() const { return placement_; }
  const IsaLevel& isa_level() const { return isa_level_; }

 private:
  // The CPUs the threads run on: the pinned ones, or every allowed CPU when any thread is
  // unpinned (it may run anywhere in the mask).
  std::vector<int> cpus_used() const;

  std::string name_;
  HostInventory host_;
  ThreadPlacement placement_;
  IsaLevel isa_level_;
  double clock_ghz_ = 0;
  Buffer flush_buffer_;          // allocated at the first flush, kept until the backend goes
  AllocationTally allocations_;  // what allocate() has mapped and release() not unmapped
};

}  // namespace tb::cpu
