// Launchers of the cuda backend's own kernels (kernels.cu); plain C++ so the backend and
// tests include them without nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include "backends/ops.h"

namespace tb::cuda {

// STREAM over a, b, c (n doubles, 16-byte accesses); dot accumulates into *result, which the
// launcher zeroes first.
cudaError_t launch_stream(const StreamOp& op, double* a, double* b, double* c, double* result,
                          int multiprocessors, cudaStream_t stream);

// CUDA-core fp32 peak: every thread runs `iterations` rounds of independent FMA chains;
// per_thread_mean receives one mean lane value per block.
cudaError_t launch_fma_peak(long long iterations, float one, float increment,
                            double* per_block_mean, int blocks, cudaStream_t stream);
inline constexpr int kPeakThreadsPerBlock = 256;
inline constexpr int kPeakChains = 8;  // independent FMA chains per thread

}  // namespace tb::cuda
