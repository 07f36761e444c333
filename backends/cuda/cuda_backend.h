// cuda: one NVIDIA GPU through the CUDA runtime. Device memory, transfers, event timing and
// the device description are here; GEMM in cublaslt_gemm.*, the training ops in
// training_ops.*, own kernels in kernels.cu and training_kernels.cu. Convolution (cuDNN) is
// not implemented yet and answers Unimplemented.
#pragma once

#include "backends/registry.h"

namespace tb {

BackendEntry cuda_backend_entry();

}  // namespace tb
