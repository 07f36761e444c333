#include "backends/cuda/cuda_plan.h"

#include "backends/cuda/training_kernels.h"

namespace tb::cuda {

Status CudaPlan::convert_on_device(int index, const void* from, void* to, bool to_nhwc) const {
  const OperandSpec& spec = operands_.at(index);
  const std::vector<std::int64_t>& d = spec.dims;
  return cuda_status(launch_convert_channels(dtype_size(spec.dtype), d[0], d[1], d[2], d[3], from,
                                             to, to_nhwc, nullptr),
                     "reordering an operand between NCHW and NHWC");
}

Status CudaPlan::import_operand(int index, const void* plain, Buffer device,
                                StagedCopy& staging) const {
  const OperandSpec& spec = operands_.at(index);
  if (!converts(index)) return staging.to_device(device.data, plain, spec.bytes);
  DeviceBlock plain_copy;
  if (plain_copy.allocate(spec.bytes, "an operand's plain copy").ok()) {
    TB_RETURN_IF_ERROR(staging.to_device(plain_copy.data(), plain, spec.bytes));
    TB_RETURN_IF_ERROR(convert_on_device(index, plain_copy.data(), device.data, true));
    return cuda_status(cudaDeviceSynchronize(), "reordering an operand (cudaDeviceSynchronize)");
  }
  std::vector<unsigned char> converted(spec.bytes);
  nchw_to_nhwc(plain, converted.data(), spec.dims[0], spec.dims[1], spec.dims[2], spec.dims[3],
               dtype_size(spec.dtype));
  return staging.to_device(device.data, converted.data(), spec.bytes);
}

Status CudaPlan::export_operand(int index, Buffer device, void* plain, StagedCopy& staging) const {
  const OperandSpec& spec = operands_.at(index);
  if (!converts(index)) return staging.to_host(plain, device.data, spec.bytes);
  DeviceBlock plain_copy;
  if (plain_copy.allocate(spec.bytes, "an operand's plain copy").ok()) {
    TB_RETURN_IF_ERROR(convert_on_device(index, device.data, plain_copy.data(), false));
    return staging.to_host(plain, plain_copy.data(), spec.bytes);
  }
  std::vector<unsigned char> stored(spec.bytes);
  TB_RETURN_IF_ERROR(staging.to_host(stored.data(), device.data, spec.bytes));
  nhwc_to_nchw(stored.data(), plain, spec.dims[0], spec.dims[1], spec.dims[2], spec.dims[3],
               dtype_size(spec.dtype));
  return Status::Ok();
}

std::int64_t CudaPlan::stored_offset(int index, std::int64_t plain) const {
  if (!converts(index)) return plain;
  const std::vector<std::int64_t>& d = operands_.at(index).dims;
  const ActivationShape nchw{d[0], d[1], d[2], d[3], false}, nhwc{d[0], d[1], d[2], d[3], true};
  const ActivationShape::Coordinates at = nchw.coordinates(plain);
  return nhwc.offset(at.n, at.c, at.y, at.x);
}

}  // namespace tb::cuda
