#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

namespace tb {
namespace {

std::string cuda_error(const char* call, cudaError_t error) {
  return fmt::format("{}: {}", call, cudaGetErrorString(error));
}

std::string cuda_version(int version) {
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

// Times device work with events recorded on the default stream.
class EventTimer final : public Timer {
 public:
  EventTimer() {
    cudaEventCreate(&start_);
    cudaEventCreate(&stop_);
  }
  ~EventTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start() override { cudaEventRecord(start_); }
  double stop_seconds() override {
    cudaEventRecord(stop_);
    cudaEventSynchronize(stop_);
    float ms = 0;
    cudaEventElapsedTime(&ms, start_, stop_);
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const cudaDeviceProp& properties) : properties_(properties) {}

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
    info.libraries = {{"CUDA runtime", cuda_version(runtime)},
                      {"CUDA driver", cuda_version(driver)}};
    int clock_khz = 0, memory_clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, 0);
    info.clock_ghz = clock_khz * 1e-6;
    info.details = {
        {"compute_capability", fmt::format("{}.{}", properties_.major, properties_.minor)},
        {"multiprocessors", properties_.multiProcessorCount},
        {"memory_clock_ghz", memory_clock_khz * 1e-6},
        {"memory_bus_bits", properties_.memoryBusWidth},
        {"last_level_cache_bytes", properties_.l2CacheSize}};
    return info;
  }

  Status allocate(std::size_t bytes, Buffer* out) override {
    void* data = nullptr;
    if (const cudaError_t error = cudaMalloc(&data, bytes); error != cudaSuccess)
      return Status::OutOfMemory(fmt::format("cannot allocate {:.2f} GiB on the GPU: {}",
                                             bytes / double(1 << 30), cudaGetErrorString(error)));
    if (const cudaError_t error = cudaMemset(data, 0, bytes); error != cudaSuccess)
      return Status::Failed(cuda_error("cudaMemset", error));
    *out = Buffer{data, bytes};
    return Status::Ok();
  }
  void release(Buffer buffer) override {
    if (buffer.data) cudaFree(buffer.data);
  }
  Status upload(const void* host, Buffer device, std::size_t bytes) override {
    return copy(device.data, host, bytes, cudaMemcpyHostToDevice);
  }
  Status download(Buffer device, void* host, std::size_t bytes) override {
    return copy(host, device.data, bytes, cudaMemcpyDeviceToHost);
  }
  void synchronize() override { cudaDeviceSynchronize(); }
  std::unique_ptr<Timer> make_timer() override { return std::make_unique<EventTimer>(); }

  Status plan(const OpDesc& op, std::unique_ptr<Plan>*) override {
    return Status::Unimplemented(fmt::format("cuda: op '{}' is not implemented yet", op_name(op)));
  }
  Status import_operand(const Plan&, int, const void*, Buffer) override {
    return Status::Unimplemented("cuda: no plans yet");
  }
  Status export_operand(const Plan&, int, Buffer, void*) override {
    return Status::Unimplemented("cuda: no plans yet");
  }
  Status execute(Plan&, std::span<const Buffer>, Buffer) override {
    return Status::Unimplemented("cuda: no plans yet");
  }

 private:
  static Status copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    const cudaError_t error = cudaMemcpy(dst, src, bytes, kind);
    return error == cudaSuccess ? Status::Ok() : Status::Failed(cuda_error("cudaMemcpy", error));
  }

  cudaDeviceProp properties_;
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
  return {
      "cuda",
      "NVIDIA GPU through the CUDA runtime (device memory, transfers, event timing; ops not yet)",
      probe, [](const BackendConfig&, std::unique_ptr<Backend>* out) {
        const Availability availability = probe();
        if (!availability.usable) return Status::Unavailable(availability.reason);
        cudaDeviceProp properties{};
        if (const cudaError_t error = cudaGetDeviceProperties(&properties, 0); error != cudaSuccess)
          return Status::Unavailable(cuda_error("cudaGetDeviceProperties", error));
        *out = std::make_unique<CudaBackend>(properties);
        return Status::Ok();
      }};
}

}  // namespace tb
