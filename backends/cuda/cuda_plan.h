// What the cuda backend's plans share: a run on a CUDA stream, and CUDA errors as Status.
#pragma once

#include <cuda_runtime_api.h>

#include <span>
#include <string>

#include <fmt/format.h>

#include "backends/backend.h"

namespace tb::cuda {

// Operands are plain (row-major) device buffers; data moves with cudaMemcpy.
class CudaPlan : public Plan {
 public:
  virtual Status run(std::span<const Buffer> operands, Buffer workspace, cudaStream_t stream) = 0;
};

// Out of device memory is out_of_memory; every other error fails the case with its name.
inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  const std::string message = fmt::format("{}: {}", what, cudaGetErrorString(error));
  return error == cudaErrorMemoryAllocation ? Status::OutOfMemory(message)
                                            : Status::Failed(message);
}

}  // namespace tb::cuda
