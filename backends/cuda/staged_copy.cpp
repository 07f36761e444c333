#include "backends/cuda/staged_copy.h"

#include <algorithm>

#include "backends/cuda/cuda_plan.h"
#include "backends/host/host_plan.h"

namespace tb::cuda {

StagedCopy::~StagedCopy() {
  if (!pinned_[0]) return;
  cudaStreamSynchronize(nullptr);  // a copy left in flight by an error path
  for (std::size_t half = 0; half < 2; ++half) {
    cudaFreeHost(pinned_[half]);
    cudaEventDestroy(done_[half]);
  }
}

Status StagedCopy::reserve() {
  if (pinned_[0]) return Status::Ok();
  std::array<void*, 2> pinned{};
  std::array<cudaEvent_t, 2> done{};
  cudaError_t error = cudaSuccess;
  for (std::size_t half = 0; half < 2 && error == cudaSuccess; ++half) {
    error = cudaMallocHost(&pinned[half], kChunkBytes);
    if (error == cudaSuccess) error = cudaEventCreateWithFlags(&done[half], cudaEventDisableTiming);
  }
  if (error != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it for the next launch's check
    for (std::size_t half = 0; half < 2; ++half) {
      if (pinned[half]) cudaFreeHost(pinned[half]);
      if (done[half]) cudaEventDestroy(done[half]);
    }
    return cuda_status(error, "pinned staging buffers (cudaMallocHost)");
  }
  pinned_ = pinned, done_ = done;
  return Status::Ok();
}

// Chunk c goes through half c % 2: the host fills one half while the other's transfer runs.
Status StagedCopy::to_device(void* device, const void* host, std::size_t bytes) {
  if (bytes < kDirectBytes)
    return cuda_status(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  TB_RETURN_IF_ERROR(reserve());
  for (std::size_t offset = 0, chunk = 0; offset < bytes; offset += kChunkBytes, ++chunk) {
    const std::size_t half = chunk % 2, count = std::min(kChunkBytes, bytes - offset);
    // The half's previous transfer has left it before the host writes it again.
    TB_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(done_[half]), "cudaEventSynchronize"));
    cpu::parallel_copy(pinned_[half], static_cast<const char*>(host) + offset, count);
    TB_RETURN_IF_ERROR(
        cuda_status(cudaMemcpyAsync(static_cast<char*>(device) + offset, pinned_[half], count,
                                    cudaMemcpyHostToDevice, nullptr),
                    "cudaMemcpyAsync (staged)"));
    TB_RETURN_IF_ERROR(cuda_status(cudaEventRecord(done_[half], nullptr), "cudaEventRecord"));
  }
  return cuda_status(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
}

// Chunk c's transfer into half c % 2 is queued before the host drains chunk c - 1 from the
// other half.
Status StagedCopy::to_host(void* host, const void* device, std::size_t bytes) {
  if (bytes < kDirectBytes)
    return cuda_status(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  TB_RETURN_IF_ERROR(reserve());
  const std::size_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  auto count_of = [&](std::size_t chunk) {
    return std::min(kChunkBytes, bytes - chunk * kChunkBytes);
  };
  for (std::size_t chunk = 0; chunk <= chunks; ++chunk) {
    if (chunk < chunks) {
      const std::size_t half = chunk % 2;
      TB_RETURN_IF_ERROR(cuda_status(
          cudaMemcpyAsync(pinned_[half], static_cast<const char*>(device) + chunk * kChunkBytes,
                          count_of(chunk), cudaMemcpyDeviceToHost, nullptr),
          "cudaMemcpyAsync (staged)"));
      TB_RETURN_IF_ERROR(cuda_status(cudaEventRecord(done_[half], nullptr), "cudaEventRecord"));
    }
    if (chunk == 0) continue;
    const std::size_t previous = chunk - 1, half = previous % 2;
    TB_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(done_[half]), "cudaEventSynchronize"));
    cpu::parallel_copy(static_cast<char*>(host) + previous * kChunkBytes, pinned_[half],
                       count_of(previous));
  }
  return Status::Ok();
}

}  // namespace tb::cuda
