#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "backends/cuda/cublaslt_gemm.h"
#ifdef TRAINBENCH_HAVE_CUDNN
#include "backends/cuda/cudnn_attention.h"
#include "backends/cuda/cudnn_conv.h"
#include "backends/cuda/cudnn_norm.h"
#endif
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/datasheet.h"
#include "backends/cuda/event_timer.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/nvml.h"
#ifdef TRAINBENCH_HAVE_NCCL
#include "backends/cuda/nccl_communicator.h"
#endif
#include "backends/cuda/training_kernels.h"
#include "backends/cuda/training_ops.h"
#include "backends/operands.h"
#include "backends/overloaded.h"
#include "backends/periodic_monitor.h"

namespace tb {
namespace {

// The GPU this process drives (BackendConfig::device, set when the backend is made). NVML is
// asked about the same index, which names the same GPU unless CUDA_VISIBLE_DEVICES reorders them.
int current_device() {
  int device = 0;
  cudaGetDevice(&device);
  return device;
}

using namespace cuda;

std::string cuda_error(const char* call, cudaError_t error) {
  return fmt::format("{}: {}", call, cudaGetErrorString(error));
}

std::string cuda_version(int version) {
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

class StreamPlan final : public CudaPlan {
 public:
  StreamPlan(const StreamOp& op, int multiprocessors) : op_(op), multiprocessors_(multiprocessors) {
    operands_ = stream_operands(op);
    implementation_ = fmt::format(
        "trainbench grid-stride kernel, double2 accesses, {} SMs x 4 blocks x 256 threads",
        multiprocessors);
    math_mode_ = "fp64, no fused multiply-add";
  }
  Status run(std::span<const Buffer> operands, Buffer, cudaStream_t stream) override {
    const BoundOperands bound(operands_, operands);
    auto array = [&](const char* name) { return static_cast<double*>(bound.buffer(name).data); };
    double* result = bound.out_if<double>("result");
    return cuda_status(
        launch_stream(op_, array("a"), array("b"), array("c"), result, multiprocessors_, stream),
        "stream kernel");
  }

 private:
  StreamOp op_;
  int multiprocessors_;
};

class TransferPlan final : public CudaPlan {
 public:
  explicit TransferPlan(const TransferOp& op) : op_(op) {
    operands_ = transfer_operands(op);
    implementation_ =
        fmt::format("cudaMemcpyAsync{}",
                    op.direction == TransferDirection::device_to_device ? ", device to device"
                    : op.pinned                                         ? ", pinned host memory"
                                : ", pageable host memory (staged by the driver)");
    math_mode_ = "none";
  }
  Status run(std::span<const Buffer> operands, Buffer, cudaStream_t stream) override {
    const BoundOperands bound(operands_, operands);
    const Buffer& source = bound.buffer("source");
    return cuda_status(cudaMemcpyAsync(bound.output_buffer("destination").data, source.data,
                                       source.bytes, cudaMemcpyDefault, stream),
                       "cudaMemcpyAsync");
  }

 private:
  TransferOp op_;
};

class PeakPlan final : public CudaPlan {
 public:
  PeakPlan(const PeakOp& op, int multiprocessors) : op_(op), blocks_(multiprocessors * 8) {
    operands_ = peak_operands(blocks_);
    implementation_ = fmt::format("trainbench fmaf chains, {} blocks x {} threads x {} chains",
                                  blocks_, kPeakThreadsPerBlock, kPeakChains);
    math_mode_ = "f32 (CUDA cores)";
    flops_per_execution_ =
        2.0 * blocks_ * kPeakThreadsPerBlock * kPeakChains * static_cast<double>(op.iterations);
  }
  Status run(std::span<const Buffer> operands, Buffer, cudaStream_t stream) override {
    return cuda_status(launch_fma_peak(op_.iterations, 1.0f, static_cast<float>(kPeakIncrement),
                                       BoundOperands(operands_, operands).out<double>("per_worker"),
                                       blocks_, stream),
                       "peak kernel");
  }

 private:
  PeakOp op_;
  int blocks_;
};

// The Tensor Core probe (bf16, f16, tf32): WMMA chains in registers, validated like the fp32
// probe, 8 blocks of 4 warps per multiprocessor.
class TensorPeakPlan final : public CudaPlan {
 public:
  TensorPeakPlan(const PeakOp& op, int multiprocessors) : op_(op), blocks_(multiprocessors * 8) {
    operands_ = peak_operands(blocks_);
    implementation_ = fmt::format(
        "trainbench WMMA mma.sync chains, {} blocks x {} warps x {} accumulators ({} inputs; "
        "Hopper's wgmma, which the datasheet rate assumes, is not used)",
        blocks_, kTensorPeakWarps, kTensorPeakChains, dtype_name(op.dtype));
    math_mode_ = fmt::format("{} inputs, fp32 accumulation (Tensor Cores)", dtype_name(op.dtype));
    flops_per_execution_ = tensor_peak_flops(op.dtype, op.iterations, blocks_);
  }
  Status run(std::span<const Buffer> operands, Buffer, cudaStream_t stream) override {
    return cuda_status(
        launch_tensor_peak(op_.dtype, op_.iterations,
                           BoundOperands(operands_, operands).out<double>("per_worker"), blocks_,
                           stream),
        "Tensor Core peak kernel");
  }

 private:
  PeakOp op_;
  int blocks_;
};

#ifdef TRAINBENCH_HAVE_CUDNN
// cuDNN's handle, and the convolution engines chosen with it; absent with a reason when the
// library cannot start (convolution and fused attention then answer unimplemented, everything
// else runs).
class Cudnn {
 public:
  Cudnn() {
    if (const cudnnStatus_t status = cudnnCreate(&handle_); status != CUDNN_STATUS_SUCCESS) {
      handle_ = nullptr;
      reason_ = fmt::format("cudnnCreate: {}", cudnnGetErrorString(status));
    }
  }
  ~Cudnn() {
    engines_.reset();  // the engines' and graphs' plans go before their handle
    norm_graphs_.reset();
    if (handle_) cudnnDestroy(handle_);
  }
  Status plan(const ConvOp& op, std::unique_ptr<Plan>* out) {
    if (!handle_) return Status::Unimplemented("cuda: no convolution: " + reason_);
    return plan_cudnn_conv(handle_, *engines_, op, out);
  }
  Status plan(const AttentionOp& op, int compute_capability, std::unique_ptr<Plan>* out) {
    if (!handle_) return Status::Unimplemented("cuda: no fused attention: " + reason_);
    return plan_cudnn_attention(handle_, op, compute_capability, out);
  }
  Status plan(const BatchNormOp& op, std::unique_ptr<Plan>* out) {
    if (!handle_) return Status::Unimplemented("cuda: no cuDNN batch norm: " + reason_);
    return plan_cudnn_batch_norm(handle_, *norm_graphs_, op, out);
  }
  std::string version() const { return cudnn_runtime_version(); }

 private:
  cudnnHandle_t handle_ = nullptr;
  std::string reason_;
  std::unique_ptr<ConvEngineCache> engines_ = std::make_unique<ConvEngineCache>();
  std::unique_ptr<NormGraphCache> norm_graphs_ = std::make_unique<NormGraphCache>();
};
#else
class Cudnn {
 public:
  Status plan(const ConvOp&, std::unique_ptr<Plan>*) {
    return Status::Unimplemented("cuda: built without cuDNN, so no convolution");
  }
  Status plan(const AttentionOp&, int, std::unique_ptr<Plan>*) {
    return Status::Unimplemented("cuda: built without cuDNN, so no fused attention");
  }
  Status plan(const BatchNormOp&, std::unique_ptr<Plan>*) {
    return Status::Unimplemented("cuda: built without cuDNN");
  }
  std::string version() const { return "not built in"; }
};
#endif

class CudaBackend final : public Backend {
 public:
  CudaBackend(const cudaDeviceProp& properties, cublasLtHandle_t lt)
      : properties_(properties), lt_(lt), nvml_(Nvml::load(&nvml_reason_)) {}
  ~CudaBackend() override {
    release(flush_buffer_);
    cublasLtDestroy(lt_);
  }

  std::string name() const override { return "cuda"; }

  DeviceInfo device_info() const override {
    DeviceInfo info;
    info.kind = "gpu";
    info.model = properties_.name;
    info.memory_bytes = properties_.totalGlobalMem;
    info.cores = properties_.multiProcessorCount;
    info.threads_used = properties_.multiProcessorCount * properties_.maxThreadsPerMultiProcessor;
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    const std::size_t lt_version = cublasLtGetVersion();
    info.libraries = {{"CUDA runtime", cuda_version(runtime)},
                      {"CUDA driver", cuda_version(driver)},
                      {"cuBLASLt", fmt::format("{}.{}.{}", lt_version / 10000,
                                               lt_version / 100 % 100, lt_version % 100)},
                      {"cuDNN", cudnn_.version()}};
#ifdef TRAINBENCH_HAVE_NCCL
    info.libraries.push_back({"NCCL", nccl_version()});
#endif
    // CUDA 13 removed the clock fields of cudaDeviceProp: attributes instead.
    auto attribute = [](cudaDeviceAttr which) {
      int value = 0;
      cudaDeviceGetAttribute(&value, which, current_device());
      return value;
    };
    info.clock_ghz = attribute(cudaDevAttrClockRate) * 1e-6;
    // CUDA cores: 128 fp32 lanes per multiprocessor on Ampere (GA10x), Ada and Hopper; 64 on A100.
    const int lanes = properties_.major == 8 && properties_.minor == 0 ? 64 : 128;
    info.theoretical_fp32_gflops = 2.0 * lanes * properties_.multiProcessorCount * info.clock_ghz;
    const std::optional<DatasheetRates> datasheet = datasheet_rates(properties_.name);
    if (datasheet) info.theoretical_bf16_gflops = datasheet->bf16 * 1e3;
    info.details = {
        {"compute_capability", fmt::format("{}.{}", properties_.major, properties_.minor)},
        {"multiprocessors", properties_.multiProcessorCount},
        {"memory_clock_ghz", attribute(cudaDevAttrMemoryClockRate) * 1e-6},
        {"memory_bus_bits", attribute(cudaDevAttrGlobalMemoryBusWidth)},
        {"ecc", attribute(cudaDevAttrEccEnabled) != 0},
        {"pci_bus_id",
         fmt::format("{:04x}:{:02x}:{:02x}", attribute(cudaDevAttrPciDomainId),
                     attribute(cudaDevAttrPciBusId), attribute(cudaDevAttrPciDeviceId))},
        {"last_level_cache_bytes", attribute(cudaDevAttrL2CacheSize)},
        {"fp32_lanes_per_multiprocessor", lanes}};
    if (datasheet)
      info.details["datasheet_gflops"] = {
          {"model", datasheet->model},
          {"f32", datasheet->fp32 * 1e3},
          {"tf32", datasheet->tf32 * 1e3},
          {"bf16", datasheet->bf16 * 1e3},
          {"f16", datasheet->f16 * 1e3},
          {"f8_e4m3", datasheet->fp8 * 1e3},
          {"note", "vendor's dense (non-sparse) Tensor Core and CUDA-core rates"}};
    if (properties_.major >= 9)
      for (const char* dtype : {"tf32", "bf16", "f16"})
        info.probe_below_ceiling[dtype] =
            "the mma.sync probe falls short of Hopper's wgmma, which cuBLASLt and cuDNN use: "
            "percent of the datasheet figure only";
    if (nvml_)
      info.details["nvml"] = nvml_->describe(current_device());
    else
      info.details["nvml_unavailable"] = nvml_reason_;
    return info;
  }

  Status allocate(std::size_t bytes, Buffer* out) override {
    if (!health_->broken.empty())
      return Status::Unavailable(health_->broken).because(ReasonCode::backend_broken);
    void* data = nullptr;
    if (const cudaError_t error = cudaMalloc(&data, bytes); error != cudaSuccess) {
      if (is_sticky(error)) return health_->check(error, "cudaMalloc");
      cudaGetLastError();  // clear it: the next launch's check must not report this failure
      if (error != cudaErrorMemoryAllocation) return cuda_status(error, "cudaMalloc");
      return Status::OutOfMemory(fmt::format("cannot allocate {:.2f} GiB on the GPU: {}",
                                             bytes / double(1 << 30), cudaGetErrorString(error)));
    }
    if (const cudaError_t error = cudaMemset(data, 0, bytes); error != cudaSuccess) {
      cudaFree(data);
      return health_->check(error, "cudaMemset");
    }
    *out = Buffer{data, bytes, MemoryKind::device};
    device_allocations_.add(bytes);
    return Status::Ok();
  }
  Status allocate_host(std::size_t bytes, bool pinned, Buffer* out) override {
    void* data = nullptr;
    if (pinned) {
      if (const cudaError_t error = cudaMallocHost(&data, bytes); error != cudaSuccess) {
        cudaGetLastError();  // not sticky: clear it for the next launch's check
        return Status::OutOfMemory(cuda_error("cudaMallocHost", error));
      }
    } else if (!(data = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096))) {
      return Status::OutOfMemory(
          fmt::format("cannot allocate {:.2f} GiB of host memory", bytes / double(1 << 30)));
    }
    std::memset(data, 0, bytes);  // touch every page before any timing
    *out = Buffer{data, bytes, pinned ? MemoryKind::host_pinned : MemoryKind::host_pageable};
    return Status::Ok();
  }
  void release(Buffer buffer) override {
    if (!buffer.data) return;
    switch (buffer.kind) {
      case MemoryKind::device:
        cudaFree(buffer.data);
        device_allocations_.remove(buffer.bytes);
        break;
      case MemoryKind::host_pinned:
        cudaFreeHost(buffer.data);
        break;
      case MemoryKind::host_pageable:
        std::free(buffer.data);
        break;
    }
  }
  // A pageable host buffer (the step's hyper-parameters, dropout step and loss scale, which
  // kernels read at launch) is copied on the host: cudaMemcpy would wait for the device. A
  // pinned one may be the target of an asynchronous transfer still in flight: it goes through
  // cudaMemcpy, which waits for it.
  Status upload(const void* host, Buffer device, std::size_t bytes) override {
    if (bytes > device.bytes) return Status::InvalidArgument("upload larger than the buffer");
    if (device.kind == MemoryKind::host_pageable) {
      std::memcpy(device.data, host, bytes);
      return Status::Ok();
    }
    return health_->check(cudaMemcpy(device.data, host, bytes, cudaMemcpyDefault), "cudaMemcpy");
  }
  Status download(Buffer device, void* host, std::size_t bytes) override {
    if (bytes > device.bytes) return Status::InvalidArgument("download larger than the buffer");
    if (device.kind == MemoryKind::host_pageable) {
      std::memcpy(host, device.data, bytes);
      return Status::Ok();
    }
    return health_->check(cudaMemcpy(host, device.data, bytes, cudaMemcpyDefault), "cudaMemcpy");
  }
  void synchronize() override {
    health_->record(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  Status flush_caches() override {
    if (!flush_buffer_.data) {
      int l2 = 0;
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, current_device());
      TB_RETURN_IF_ERROR(
          allocate(2 * static_cast<std::size_t>(std::max(l2, 1 << 20)), &flush_buffer_));
    }
    return cuda_status(cudaMemsetAsync(flush_buffer_.data, flush_value_++, flush_buffer_.bytes),
                       "L2 flush");
  }
  std::unique_ptr<Timer> make_timer() override {
    return std::make_unique<EventTimer>(health_);
  }
  Status make_communicator(World& world, std::unique_ptr<Communicator>* out) override {
#ifdef TRAINBENCH_HAVE_NCCL
    if (!health_->broken.empty())
      return Status::Unavailable(health_->broken).because(ReasonCode::backend_broken);
    return make_nccl_communicator(world, health_, out);
#else
    (void)world, (void)out;
    return Status::Unimplemented("cuda: built without NCCL, so no collectives");
#endif
  }
  std::string broken() const override {
    return health_->broken;
  }
  std::unique_ptr<TelemetryMonitor> start_telemetry() override {
    return nvml_ ? Nvml::monitor(nvml_, current_device())
                 : unread_telemetry("NVML", "no NVML: " + nvml_reason_);
  }
  // Device memory through cudaMalloc, and what the driver says is free. The allowance covers
  // what cuBLASLt, cuDNN and NCCL allocate themselves (handles, workspaces, channel buffers).
  std::optional<MemoryUse> memory_use() const override {
    constexpr std::uint64_t kLibraryAllowance = 512ull << 20;
    MemoryUse use{.allocated_bytes = device_allocations_.held(),
                  .allocated_peak_bytes = device_allocations_.peak(),
                  .device_free_bytes = std::nullopt,
                  .allowance_bytes = kLibraryAllowance};
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) use.device_free_bytes = free;
    return use;
  }
  void reset_memory_peak() override {
    device_allocations_.reset_peak();
  }

  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override {
    if (!health_->broken.empty())
      return Status::Unavailable(health_->broken).because(ReasonCode::backend_broken);
    const int compute_capability = properties_.major * 10 + properties_.minor;
    return std::visit(
        Overloaded{[&](const StreamOp& stream) { return plan_stream(stream, out); },
                   [&](const GemmOp& gemm) {
                     return plan_cublaslt_gemm(lt_, gemm, out, compute_capability);
                   },
                   [&](const ConvOp& conv) { return cudnn_.plan(conv, out); },
                   [&](const AttentionOp& attention) {
                     return cudnn_.plan(attention, compute_capability, out);
                   },
                   [&](const TransferOp& transfer) {
                     *out = std::make_unique<TransferPlan>(transfer);
                     return Status::Ok();
                   },
                   [&](const PeakOp& peak) { return plan_peak(peak, out); },
                   [&](const BatchNormOp& norm) { return plan_batch_norm(norm, op, out); },
                   [&](const auto&) { return plan_training_op(lt_, op, out); }},
        op);
  }
  Status import_operand(const Plan& plan, int index, const void* plain, Buffer device) override {
    if (device.kind != MemoryKind::device)
      return upload(plain, device, plan.operands().at(index).bytes);
    return static_cast<const CudaPlan&>(plan).import_operand(index, plain, device, staging_);
  }
  Status export_operand(const Plan& plan, int index, Buffer device, void* plain) override {
    if (device.kind != MemoryKind::device)
      return download(device, plain, plan.operands().at(index).bytes);
    return static_cast<const CudaPlan&>(plan).export_operand(index, device, plain, staging_);
  }
  // The sampled elements gathered on the device: kilobytes leave it, not the operand.
  Status gather_operand(const Plan& plan, int index, Buffer device,
                        std::span<const std::int64_t> positions, void* values) override {
    if (device.kind != MemoryKind::device)
      return Backend::gather_operand(plan, index, device, positions, values);
    const OperandSpec& spec = plan.operands().at(index);
    const auto elements = static_cast<std::int64_t>(spec.elements());
    std::vector<long long> offsets(positions.size());
    for (std::size_t i = 0; i < positions.size(); ++i) {
      if (positions[i] < 0 || positions[i] >= elements)
        return Status::InvalidArgument(fmt::format(
            "position {} is outside operand {} ({} elements)", positions[i], spec.name, elements));
      offsets[i] = static_cast<const CudaPlan&>(plan).stored_offset(index, positions[i]);
    }
    const std::size_t element = dtype_size(spec.dtype), count = positions.size();
    DeviceBlock scratch;  // the offsets, then the values
    TB_RETURN_IF_ERROR(
        scratch.allocate(count * (sizeof(long long) + element), "gathering samples"));
    auto* device_offsets = static_cast<long long*>(scratch.data());
    void* gathered = device_offsets + count;
    TB_RETURN_IF_ERROR(health_->check(cudaMemcpy(device_offsets, offsets.data(),
                                                 count * sizeof(long long), cudaMemcpyHostToDevice),
                                      "cudaMemcpy (sample offsets)"));
    TB_RETURN_IF_ERROR(
        health_->check(launch_gather(element, device.data, device_offsets,
                                     static_cast<long long>(count), gathered, nullptr),
                       "gathering samples"));
    return health_->check(cudaMemcpy(values, gathered, count * element, cudaMemcpyDeviceToHost),
                          "cudaMemcpy (gathered samples)");
  }
  // Seeded values written where the operand lives: a product at batch 256 takes gigabytes of
  // inputs, which a host fill and copy would spend most of a lease on.
  Status fill_operand(const Plan& plan, int index, Buffer buffer, std::uint64_t seed) override {
    const OperandSpec& spec = plan.operands().at(index);
    if (buffer.kind != MemoryKind::device || !kernel_dtype(spec.dtype))
      return Backend::fill_operand(plan, index, buffer, seed);
    return health_->check(
        launch_fill_random(spec.dtype, buffer.data, static_cast<std::int64_t>(spec.elements()),
                           seed, nullptr),
        "filling an operand with seeded values");
  }
  Status execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) override {
    if (operands.size() != plan.operands().size())
      return Status::InvalidArgument(
          fmt::format("plan takes {} operands, got {}", plan.operands().size(), operands.size()));
    // Launches are asynchronous: the timer's events and synchronize() bound the work.
    if (workspace.bytes < plan.workspace_bytes())
      return Status::InvalidArgument("workspace smaller than the plan needs");
    if (!health_->broken.empty())
      return Status::Unavailable(health_->broken).because(ReasonCode::backend_broken);
    const Status status = static_cast<CudaPlan&>(plan).run(operands, workspace, nullptr);
    // A launch reports an earlier kernel's fault too: a sticky one breaks the context.
    if (!status.ok()) health_->record(cudaPeekAtLastError(), "a kernel before this op");
    return status;
  }

 private:
  Status plan_stream(const StreamOp& stream, std::unique_ptr<Plan>* out) const {
    if (stream.n <= 0) return Status::InvalidArgument("stream needs n > 0");
    *out = std::make_unique<StreamPlan>(stream, properties_.multiProcessorCount);
    return Status::Ok();
  }
  Status plan_peak(const PeakOp& peak, std::unique_ptr<Plan>* out) const {
    if (peak.iterations <= 0 || peak.iterations > kPeakMaxIterations)
      return Status::InvalidArgument("peak iterations must be in [1, 2^22]");
    if (peak.dtype == DType::f32) {
      *out = std::make_unique<PeakPlan>(peak, properties_.multiProcessorCount);
      return Status::Ok();
    }
    const bool tensor =
        peak.dtype == DType::bf16 || peak.dtype == DType::f16 || peak.dtype == DType::tf32;
    if (!tensor || properties_.major < 8)
      return Status::Unimplemented(fmt::format(
          "cuda: no {} peak probe (Tensor Core probes: bf16, f16, tf32 on sm_80 and up)",
          dtype_name(peak.dtype)));
    if (peak.iterations > kTensorPeakMaxIterations)
      return Status::InvalidArgument(
          "Tensor Core peak: at most 2^19 iterations (beyond, a product falls below the "
          "accumulator's last bit and the exact check would fail)");
    *out = std::make_unique<TensorPeakPlan>(peak, properties_.multiProcessorCount);
    return Status::Ok();
  }
  // Batch norm through cuDNN where it takes the op (channels-last 16-bit training), else the
  // own kernels, which then say why cuDNN's did not run (a GPU test holds the bf16 step to
  // cuDNN's, so a refusal there does not go unseen; a benchmark still gets its figures).
  Status plan_batch_norm(const BatchNormOp& norm, const OpDesc& op, std::unique_ptr<Plan>* out) {
    const Status cudnn = cudnn_.plan(norm, out);
    if (cudnn.ok()) return cudnn;
    TB_RETURN_IF_ERROR(plan_training_op(lt_, op, out));
    static_cast<CudaPlan&>(**out).note(fmt::format("; not cuDNN's: {}", cudnn.message()));
    return Status::Ok();
  }

  cudaDeviceProp properties_;
  cublasLtHandle_t lt_;
  Cudnn cudnn_;
  std::shared_ptr<Health> health_ = std::make_shared<Health>();
  std::string nvml_reason_;
  std::shared_ptr<const Nvml> nvml_;  // absent (with the reason) where NVML is missing
  Buffer flush_buffer_;               // twice the L2, allocated at the first flush
  int flush_value_ = 0;
  AllocationTally device_allocations_;  // what cudaMalloc holds for allocate()
  StagedCopy staging_;                  // for import_operand and export_operand
};

Availability probe() {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess)
    return {false, cuda_error("no usable CUDA device (cudaGetDeviceCount)", error)};
  if (count == 0) return {false, "no CUDA device"};
  return {true, ""};
}

}  // namespace

BackendEntry cuda_backend_entry() {
  return {"cuda",
          "NVIDIA GPU through the CUDA runtime (cuBLASLt GEMM, cuDNN convolution, stream, "
          "transfers, fp32 peak, training ops)",
          probe, [](const BackendConfig& config, std::unique_ptr<Backend>* out) {
            const Availability availability = probe();
            if (!availability.usable) return Status::Unavailable(availability.reason);
            int count = 0;
            cudaGetDeviceCount(&count);
            if (config.device >= count)
              return Status::Unavailable(
                  fmt::format("GPU {} asked for, {} on this host: run at most one rank per GPU",
                              config.device, count));
            if (const cudaError_t error = cudaSetDevice(config.device); error != cudaSuccess)
              return Status::Unavailable(cuda_error("cudaSetDevice", error));
            cudaDeviceProp properties{};
            if (const cudaError_t error = cudaGetDeviceProperties(&properties, config.device);
                error != cudaSuccess)
              return Status::Unavailable(cuda_error("cudaGetDeviceProperties", error));
            cublasLtHandle_t lt = nullptr;
            if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
              return Status::Unavailable("cublasLtCreate failed");
            *out = std::make_unique<CudaBackend>(properties, lt);
            return Status::Ok();
          }};
}

}  // namespace tb
