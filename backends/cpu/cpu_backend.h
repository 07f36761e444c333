// What every CPU backend shares: host memory (allocated once, first touched by the computing
// threads), the OpenMP thread placement, host-clock timing, and the STREAM and peak probes.
// A library backend derives from CpuBackend and plans its own ops, deferring the rest here.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "backends/backend.h"
#include "backends/communicator.h"
#include "backends/cpu/host_info.h"
#include "backends/cpu/peak.h"
#include "backends/cpu/threading.h"
#include "backends/registry.h"

namespace tb::cpu {

// A plan that runs on the host. Operands are in their plain layout unless the plan overrides
// the import / export conversions.
class CpuPlan : public Plan {
 public:
  virtual Status run(std::span<const Buffer> operands, Buffer workspace) = 0;
  virtual Status import_operand(int index, const void* plain_host, Buffer device) const;
  virtual Status export_operand(int index, Buffer device, void* plain_host) const;
};

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

  // Plans the shared CPU ops (stream, peak); everything else is unimplemented here.
  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override;
  Status import_operand(const Plan& plan, int index, const void* plain_host,
                        Buffer device) override;
  Status export_operand(const Plan& plan, int index, Buffer device, void* plain_host) override;
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
  Buffer flush_buffer_;  // allocated at the first flush, kept until the backend goes
};

// The double-precision reference as a backend: the shared CPU code (plan_shared_training_op)
// on ordinary host memory, without thread placement or clock measurement of its own, so a
// step on any backend, a GPU's included, is checked against the same f64 ops.
std::unique_ptr<Backend> make_host_reference_backend();

// Parallel copy with the same static partition as the first touch, so each thread copies
// the pages it owns.
void parallel_copy(void* dst, const void* src, std::size_t bytes);

}  // namespace tb::cpu
