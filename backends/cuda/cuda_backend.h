// cuda: one NVIDIA GPU through the CUDA runtime. Device memory, transfers, event timing and
// the device description are here; the ops (cuBLASLt GEMM, cuDNN convolution, bandwidth
// kernels) are not implemented yet and answer Unimplemented.
#pragma once

#include "backends/registry.h"

namespace tb {

BackendEntry cuda_backend_entry();

}  // namespace tb
