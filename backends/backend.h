// The Backend interface: one device plus the libraries that drive it.
// Ops are planned once (descriptor in, plan with operand and workspace sizes out) and
// executed many times on caller-owned buffers. Nothing here aborts: every call returns a
// Status, and an op a backend lacks answers StatusCode::unimplemented with a reason.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ops.h"
#include "backends/status.h"

namespace tb {

class World;
class Communicator;

// Where a buffer lives. On CPU backends every kind is ordinary host memory.
enum class MemoryKind { device, host_pinned, host_pageable };

// A caller-owned region of memory: device memory unless `kind` says otherwise.
struct Buffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  MemoryKind kind = MemoryKind::device;
};

// `bytes` of `buffer` from `offset_bytes` on, in the same kind of memory.
inline Buffer slice(Buffer buffer, std::size_t offset_bytes, std::size_t bytes) {
  return {static_cast<char*>(buffer.data) + offset_bytes, bytes, buffer.kind};
}

// What an operand's values are to a checker, declared with the operand (backends/operands.cpp).
enum class OperandRole {
  value,              // read (an input) or written (an output): compared by value
  updated_in_place,   // read and written: an optimizer's weights and state, unscaled gradients
  accumulated,        // an output the op adds to (a tied embedding table's gradient)
  running_statistic,  // batch norm's running mean and variance: moved by a small momentum
  workspace,          // contents the implementation defines (ReLU masks, pooling indices)
};

// One operand of a plan, in the order execute() takes them.
struct OperandSpec {
  std::string name;  // "a", "b", "c", "src", "weights", "diff_dst", ...
  DType dtype = DType::f32;
  std::vector<std::int64_t> dims;  // logical dims in the op's plain layout
  std::size_t bytes = 0;           // size in the plan's layout (may exceed the plain size)
  bool is_output = false;
  MemoryKind memory = MemoryKind::device;  // host memory for the host side of a transfer
  OperandRole role = OperandRole::value;
  // A narrower dtype the plan rounds this output to before storing it in `dtype` (cuDNN's
  // 16-bit weight gradient, cast to the fp32 master gradient, as PyTorch's AMP does):
  // validation holds the output to that dtype's rounding.
  std::optional<DType> rounded_to = std::nullopt;

  // Whether the op reads the output's previous contents (in-place updates, sums, statistics).
  bool reads_previous() const {
    return role == OperandRole::updated_in_place || role == OperandRole::accumulated ||
           role == OperandRole::running_statistic;
  }

  DType precision() const { return rounded_to.value_or(dtype); }

  std::size_t elements() const {  // in the plain layout
    std::size_t count = 1;
    for (std::int64_t dim : dims) count *= static_cast<std::size_t>(dim);
    return count;
  }
};

class Plan {
 public:
  virtual ~Plan() = default;
  const std::vector<OperandSpec>& operands() const { return operands_; }
  std::size_t workspace_bytes() const { return workspace_bytes_; }
  // What actually runs: oneDNN's impl_info_str, a cuDNN engine, a kernel name.
  const std::string& implementation() const { return implementation_; }
  // Floating-point math mode in force ("strict" = no down-conversion of fp32).
  const std::string& math_mode() const { return math_mode_; }
  // True when what runs is a reference kernel (a library's slow, obvious loops, or our own
  // portable scalar ones where a vector variant exists): never reported as the real speed.
  bool is_reference() const { return is_reference_; }
  // True when bf16 arithmetic is emulated with other instructions (oneDNN on AVX-512 without
  // AVX512_BF16): real bf16 kernels, slower than on a CPU that has them.
  bool emulates_bf16() const { return emulates_bf16_; }
  // Work one execution does when the op itself defines it (the peak probe); otherwise 0 and
  // the workload counts it.
  double flops_per_execution() const { return flops_per_execution_; }

 protected:
  std::vector<OperandSpec> operands_;
  std::size_t workspace_bytes_ = 0;
  std::string implementation_;
  std::string math_mode_ = "strict";
  bool is_reference_ = false;
  bool emulates_bf16_ = false;
  double flops_per_execution_ = 0;
};

struct Library {
  std::string name, version;
};

// What a report records about the device a backend drives.
struct DeviceInfo {
  std::string kind;  // "cpu" or "gpu"
  std::string model;
  int sockets = 0, cores = 0, logical_cpus = 0, threads_used = 0;
  std::vector<int> affinity;  // logical CPU each worker thread is pinned to (-1: not pinned)
  std::uint64_t memory_bytes = 0;
  int numa_nodes = 0;
  std::vector<std::string> isa;
  std::vector<Library> libraries;
  double clock_ghz = 0;                // measured while running
  double theoretical_fp32_gflops = 0;  // units x pipes x lanes x 2 x clock
  double theoretical_bf16_gflops = 0;
  // dtype name -> why the backend's peak probe for it is no ceiling (a library's kernels use
  // faster instructions than the probe): its percent of peak is then of the datasheet alone.
  std::map<std::string, std::string> probe_below_ceiling;
  nlohmann::json details = nlohmann::json::object();  // backend-specific extras
};

// Device time of the work queued between start() and stop(). stop() marks the end right after
// the last launch, before anything waits (an event on the GPU's stream; the host clock on a
// CPU, whose work is done when its call returns), so a sample never carries the host's wake-up.
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  // Seconds from start() to stop(), waiting for the device to reach stop(); NaN when the
  // device could not time it.
  virtual double elapsed_seconds() = 0;
};

// Device telemetry over one measured case (power, temperature, clocks, throttling, energy),
// started before the case and read once after it.
class TelemetryMonitor {
 public:
  virtual ~TelemetryMonitor() = default;
  virtual nlohmann::json finish() = 0;  // stops sampling; what the case saw
};

// The device memory a backend's allocate() holds, and what the device says of its own.
struct MemoryUse {
  std::uint64_t allocated_bytes = 0;       // held now
  std::uint64_t allocated_peak_bytes = 0;  // the most held at once since reset_memory_peak()
  std::optional<std::uint64_t> device_free_bytes;  // free on the device now, where it says (GPU)
  // What the backend and its libraries may hold beyond a case's computed footprint (JIT code,
  // library handles and workspaces, the cache-flush buffer) before a measured peak is flagged.
  std::uint64_t allowance_bytes = 0;
};

// Adds up what an allocator holds; a backend's member, updated as it allocates and releases.
class AllocationTally {
 public:
  void add(std::uint64_t bytes) {
    held_ += bytes;
    peak_ = std::max(peak_, held_);
  }
  void remove(std::uint64_t bytes) { held_ -= std::min(bytes, held_); }
  void reset_peak() { peak_ = held_; }
  std::uint64_t held() const { return held_; }
  std::uint64_t peak() const { return peak_; }

 private:
  std::uint64_t held_ = 0, peak_ = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual DeviceInfo device_info() const = 0;

  // Device memory, allocated once per run and first touched by the threads that compute on
  // it (on CPU the touching thread decides the page's NUMA node and pays its page fault).
  virtual Status allocate(std::size_t bytes, Buffer* out) = 0;
  // Host memory for transfers: page-locked (pinned) or ordinary (pageable).
  virtual Status allocate_host(std::size_t bytes, bool pinned, Buffer* out) = 0;
  virtual void release(Buffer buffer) = 0;  // any kind
  // Copies between host memory and a buffer of any kind.
  virtual Status upload(const void* host, Buffer device, std::size_t bytes) = 0;
  virtual Status download(Buffer device, void* host, std::size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Evicts the caches the device's work goes through (the last-level cache on CPU, L2 on GPU)
  // by writing a buffer larger than them; the harness calls it between samples when asked.
  virtual Status flush_caches() = 0;
  virtual std::unique_ptr<Timer> make_timer() = 0;
  // A monitor sampling the device while a case runs (one saying why where its counters cannot be
  // read); null where the backend has none (the f64 reference).
  virtual std::unique_ptr<TelemetryMonitor> start_telemetry() { return nullptr; }
  // What allocate() holds and has held at most since reset_memory_peak() (the runner resets it
  // as each case starts); nullopt where the backend does not count (the f64 reference).
  virtual std::optional<MemoryUse> memory_use() const { return std::nullopt; }
  virtual void reset_memory_peak() {}

  virtual Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) = 0;
  // Convert operand `index` between the op's plain layout and the plan's layout.
  virtual Status import_operand(const Plan& plan, int index, const void* plain_host,
                                Buffer device) = 0;
  virtual Status export_operand(const Plan& plan, int index, Buffer device, void* plain_host) = 0;
  // The values export_operand would give at `positions` (indices into the plain layout), one
  // element of the operand's dtype each, into `values`: what a sampled check reads, moved
  // without the rest of the operand where the backend can address its layout. The default
  // exports the whole operand.
  virtual Status gather_operand(const Plan& plan, int index, Buffer device,
                                std::span<const std::int64_t> positions, void* values);
  // Operand `index` set to seeded values uniform in [-1, 1) (counter_values' distribution, in
  // the order the buffer stores them) where the buffer lives: inputs whose values nothing
  // checks, only times. The default is unimplemented: the caller fills on the host and imports.
  virtual Status fill_operand(const Plan& plan, int index, Buffer buffer, std::uint64_t seed);
  virtual Status execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) = 0;
  // Why the backend can run nothing more (a sticky device error), or empty while healthy.
  virtual std::string broken() const { return ""; }

  // Collectives between the ranks of `world` on this backend's memory (backends/communicator.h):
  // MPI on host memory for CPU backends, NCCL on device memory for cuda.
  virtual Status make_communicator(World& world, std::unique_ptr<Communicator>* out) {
    (void)world, (void)out;
    return Status::Unimplemented(name() + " has no collectives");
  }
};

}  // namespace tb
