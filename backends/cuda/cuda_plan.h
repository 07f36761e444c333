// What the cuda backend's plans share: a run on a CUDA stream, and CUDA errors as Status.
#pragma once

#include <cuda_runtime_api.h>

#include <span>
#include <string>

#include <fmt/format.h>

#include "backends/backend.h"

namespace tb::cuda {

// Errors that leave the CUDA context unusable: every later call in the process fails with
// them, so the backend stops running GPU cases once one is seen.
inline bool is_sticky(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

// Out of device memory is out_of_memory; every other error fails the case with its name (a
// sticky one says so).
inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  const std::string message =
      fmt::format("{}: {}{}", what, cudaGetErrorString(error),
                  is_sticky(error) ? " (sticky: the GPU context is unusable from here on)" : "");
  return error == cudaErrorMemoryAllocation ? Status::OutOfMemory(message)
                                            : Status::Failed(message);
}

// Operands are device buffers, plain (row-major, NCHW) unless the plan converts them in
// import_operand / export_operand (a channels-last convolution).
class CudaPlan : public Plan {
 public:
  virtual Status run(std::span<const Buffer> operands, Buffer workspace, cudaStream_t stream) = 0;
  virtual Status import_operand(int index, const void* plain, Buffer device) const {
    return cuda_status(cudaMemcpy(device.data, plain, operands_.at(index).bytes, cudaMemcpyDefault),
                       "cudaMemcpy");
  }
  virtual Status export_operand(int index, Buffer device, void* plain) const {
    return cuda_status(cudaMemcpy(plain, device.data, operands_.at(index).bytes, cudaMemcpyDefault),
                       "cudaMemcpy");
  }
};

}  // namespace tb::cuda
