// cuda: one NVIDIA GPU through the CUDA runtime. Device memory, transfers, event timing and
// the device description are here; GEMM in cublaslt_gemm.*, convolution in cudnn_conv.* (when
// built with cuDNN), the training ops in training_ops.*, own kernels in kernels.cu and one .cu
// per family of training ops (training_kernels.h).
#pragma once

#include "backends/registry.h"

namespace tb {

BackendEntry cuda_backend_entry();

}  // namespace tb
