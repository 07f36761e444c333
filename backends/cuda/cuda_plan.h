// What the cuda backend's plans share: a run on a CUDA stream, and CUDA errors as Status.
#pragma once

#include <cuda_runtime_api.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cuda/nhwc.h"

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
                                            : Status::LibraryFailed(message);
}

// Operands are device buffers, plain (row-major, NCHW) unless the plan keeps its 4-D operands
// channels-last (channels_last_, set by plans for 16-bit data); import_operand /
// export_operand then convert them on the host from and to the callers' plain NCHW.
class CudaPlan : public Plan {
 public:
  virtual Status run(std::span<const Buffer> operands, Buffer workspace, cudaStream_t stream) = 0;
  // Adds to the implementation string (why a library path was not taken).
  void note(std::string_view text) { implementation_ += text; }
  // Whether operand `index` is stored NHWC: every 4-D operand of a channels-last plan, unless
  // the plan says otherwise (a convolution that keeps its weights plain).
  virtual bool stored_channels_last(int index) const {
    return channels_last_ && operands_.at(index).dims.size() == 4;
  }
  Status import_operand(int index, const void* plain, Buffer device) const {
    const OperandSpec& spec = operands_.at(index);
    if (!converts(index)) return copy(device.data, plain, spec.bytes);
    std::vector<unsigned char> converted(spec.bytes);
    nchw_to_nhwc(plain, converted.data(), spec.dims[0], spec.dims[1], spec.dims[2], spec.dims[3],
                 dtype_size(spec.dtype));
    return copy(device.data, converted.data(), spec.bytes);
  }
  Status export_operand(int index, Buffer device, void* plain) const {
    const OperandSpec& spec = operands_.at(index);
    if (!converts(index)) return copy(plain, device.data, spec.bytes);
    std::vector<unsigned char> stored(spec.bytes);
    TB_RETURN_IF_ERROR(copy(stored.data(), device.data, spec.bytes));
    nhwc_to_nchw(stored.data(), plain, spec.dims[0], spec.dims[1], spec.dims[2], spec.dims[3],
                 dtype_size(spec.dtype));
    return Status::Ok();
  }

 protected:
  bool channels_last_ = false;

 private:
  // NHWC and NCHW place the values alike with one channel or one pixel per image (a
  // grey-scale input, a pooled feature vector): nothing to reorder.
  bool converts(int index) const {
    if (!stored_channels_last(index)) return false;
    const std::vector<std::int64_t>& dims = operands_.at(index).dims;
    return dims[1] > 1 && dims[2] * dims[3] > 1;
  }
  static Status copy(void* to, const void* from, std::size_t bytes) {
    return cuda_status(cudaMemcpy(to, from, bytes, cudaMemcpyDefault), "cudaMemcpy");
  }
};

}  // namespace tb::cuda
