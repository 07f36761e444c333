// cuda: one NVIDIA GPU through the CUDA runtime. Device memory, transfers, event timing and
// the device description are here; GEMM in cublaslt_gemm.*, convolution in cudnn_conv.* (when
// built with cuDNN), the training ops in training_ops.*, own kernels in kernels.cu and
// training_kernels.cu.
#pragma once

#include "backends/registry.h"

namespace tb {

BackendEntry cuda_backend_entry();

}  // namespace tb
