// cpu-onednn: GEMM through oneDNN matmul and convolutions through oneDNN convolution
// primitives (oneDNN 2.x API), on the shared CPU pieces for memory, threads, stream and peak.
#pragma once

#include "backends/registry.h"

namespace tb {

BackendEntry onednn_backend_entry();

}  // namespace tb
