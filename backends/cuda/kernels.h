// Launchers of the cuda backend's own kernels (kernels.cu); plain C++ so the backend and
// tests include them without nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

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

// Tensor Core peak (bf16, f16, tf32 on sm_80 and up): every warp runs `iterations` rounds of
// independent 16x16xK mma.sync chains (WMMA) on constant fragments scaled so that each
// accumulator element gains peak_increment_per_iteration(dtype) per round, exactly;
// per_block_mean receives each block's mean accumulator element.
cudaError_t launch_tensor_peak(DType dtype, long long iterations, double* per_block_mean,
                               int blocks, cudaStream_t stream);

// FLOPs one launch does.
double tensor_peak_flops(DType dtype, long long iterations, int blocks);
inline constexpr int kTensorPeakWarps = 4;   // per block
inline constexpr int kTensorPeakChains = 4;  // independent accumulators per warp
// Each round adds products of 2^-15 or 2^-16: past 2^19 rounds they fall below the fp32
// accumulator's last bit, which Tensor Cores truncate.
inline constexpr long long kTensorPeakMaxIterations = 1LL << 19;

// values[i] = the `element`-byte value at element offset offsets[i] of data, for i < count
// (offsets on the device): what a sampled check reads, gathered where it lives.
cudaError_t launch_gather(std::size_t element, const void* data, const long long* offsets,
                          long long count, void* values, cudaStream_t stream);

}  // namespace tb::cuda
