// cpu-openblas: GEMM through OpenBLAS's cblas_sgemm (cblas_sbgemm for bf16 where the library
// exports it) and convolutions lowered to one sgemm per image with im2col / col2im, on the
// shared CPU pieces for memory, threads, stream and peak. Built against OpenBLAS's OpenMP
// variant, so OpenBLAS and oneDNN share one libgomp thread pool.
#pragma once

#include "backends/registry.h"

namespace tb {

BackendEntry openblas_backend_entry();

}  // namespace tb
