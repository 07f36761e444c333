// What the cuda backend's plans share: a run on a CUDA stream, and CUDA errors as Status.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cuda/nhwc.h"
#include "backends/cuda/staged_copy.h"

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

// Device memory held for one task, freed on every way out.
class DeviceBlock {
 public:
  DeviceBlock() = default;
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  ~DeviceBlock() {
    if (data_) cudaFree(data_);
  }
  // `what` names the task in the error.
  Status allocate(std::size_t bytes, const char* what) {
    if (const cudaError_t error = cudaMalloc(&data_, std::max<std::size_t>(bytes, 1));
        error != cudaSuccess) {
      data_ = nullptr;
      cudaGetLastError();  // not sticky: clear it for the next launch's check
      return cuda_status(error, what);
    }
    return Status::Ok();
  }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

// Operands are device buffers, plain (row-major, NCHW) unless the plan keeps its 4-D operands
// channels-last (channels_last_, set by plans for 16-bit data); import_operand /
// export_operand then convert them from and to the callers' plain NCHW.
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
  // Between the callers' plain layout and the stored one, through `staging`; a channels-last
  // operand is reordered on the device (on the host where the device has no room for a copy).
  Status import_operand(int index, const void* plain, Buffer device, StagedCopy& staging) const;
  Status export_operand(int index, Buffer device, void* plain, StagedCopy& staging) const;
  // The element offset in the operand's buffer of the element at `plain` in the plain layout.
  std::int64_t stored_offset(int index, std::int64_t plain) const;

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
  // Reorders operand `index` between NCHW and NHWC from one device buffer into another.
  Status convert_on_device(int index, const void* from, void* to, bool to_nhwc) const;
};

}  // namespace tb::cuda
