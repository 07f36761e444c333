// Copies between pageable host memory and the device through pinned staging buffers: a
// pageable cudaMemcpy moved 6.6 GB/s on the H200 (bench/results/h200), which made whole-operand
// imports and exports at batch 256 take minutes. Pinned memory is what the DMA engines read
// at the link's speed; the host copies into and out of it run on every thread, one chunk while
// the other half is in flight.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>

#include "backends/status.h"

namespace tb::cuda {

class StagedCopy {
 public:
  StagedCopy() = default;
  ~StagedCopy();
  StagedCopy(const StagedCopy&) = delete;
  StagedCopy& operator=(const StagedCopy&) = delete;

  // Both wait for the device's earlier work (the legacy default stream orders them after it)
  // and return once the copy is complete.
  Status to_device(void* device, const void* host, std::size_t bytes);
  Status to_host(void* host, const void* device, std::size_t bytes);

  // Below this, one plain cudaMemcpy: staging costs more than it saves.
  static constexpr std::size_t kDirectBytes = std::size_t{1} << 20;
  // Each of the two pinned halves: large enough to run the link at its rate, small enough to
  // hold for the whole process (allocated at the first staged copy).
  static constexpr std::size_t kChunkBytes = std::size_t{32} << 20;

 private:
  Status reserve();

  std::array<void*, 2> pinned_{};
  std::array<cudaEvent_t, 2> done_{};
};

}  // namespace tb::cuda
