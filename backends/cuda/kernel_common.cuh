// What the cuda backend's own training kernels share (included by its .cu files only): the
// storage types, launch shapes, and reductions in a fixed order (results do not depend on
// scheduling), column sums among them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "backends/ops.h"

namespace tb::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowThreads = 128;   // one block per row: layer norm
constexpr int kColumnChunks = 64;  // row chunks a column sum is split into
constexpr int kLambChunks = 64;    // blocks per parameter tensor in LAMB's two passes

// --- storage types: data is loaded as float and stored rounded to nearest even ---

__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float to_float(__half x) {
  return __half2float(x);
}
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

// Calls f with a value of the storage type of `dtype` (tf32 data is stored as f32).
template <typename F>
cudaError_t with_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
    case DType::tf32:
      return f(float{});
    case DType::bf16:
      return f(__nv_bfloat16{});
    case DType::f16:
      return f(__half{});
    default:
      return cudaErrorInvalidValue;
  }
}

// Blocks for a grid-stride loop over n elements.
unsigned grid_for(long long n) {
  return static_cast<unsigned>(std::clamp<long long>((n + kThreads - 1) / kThreads, 1, 1 << 20));
}

#define TB_GRID_STRIDE(i, n)                                                                 \
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<long long>(gridDim.x) * blockDim.x)

// --- reductions in a fixed order: results do not depend on scheduling ---

template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The block's total (blockDim.x a multiple of 32), returned to every thread.
template <typename V>
__device__ V block_sum(V v) {
  __shared__ V partial[32];
  v = warp_sum(v);
  __syncthreads();  // the previous call's readers are done with `partial`
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  V total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += partial[w];
  return total;
}
__device__ float block_max(float v) {
  __shared__ float partial[32];
  v = warp_max(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  float top = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) top = fmaxf(top, partial[w]);
  return top;
}

// --- column sums (bias and parameter gradients): per row chunk, then chunks ---

// Block (32 columns, 8 row lanes); grid (column groups, kColumnChunks row chunks). partial
// holds [2][kColumnChunks][cols] of the accumulator type Acc (the type `values` adds into).
template <typename Acc, typename Values>
__global__ void column_partials_kernel(Values values, long long rows, long long cols,
                                       Acc* partial) {
  const long long c = blockIdx.x * 32LL + threadIdx.x;
  const long long per_chunk = (rows + gridDim.y - 1) / gridDim.y;
  const long long begin = blockIdx.y * per_chunk, end = min(rows, begin + per_chunk);
  Acc first = 0, second = 0;
  if (c < cols)
    for (long long r = begin + threadIdx.y; r < end; r += blockDim.y)
      values(r, c, cols, first, second);
  __shared__ Acc sums[2][8][33];
  sums[0][threadIdx.y][threadIdx.x] = first;
  sums[1][threadIdx.y][threadIdx.x] = second;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    Acc a = 0, b = 0;
    for (int lane = 0; lane < static_cast<int>(blockDim.y); ++lane)
      a += sums[0][lane][threadIdx.x], b += sums[1][lane][threadIdx.x];
    partial[blockIdx.y * cols + c] = a;
    partial[(gridDim.y + blockIdx.y) * cols + c] = b;
  }
}

template <typename Acc>
__global__ void finish_columns_kernel(const Acc* partial, long long cols, float* first,
                                      float* second) {
  TB_GRID_STRIDE(c, cols) {
    Acc a = 0, b = 0;
    for (int chunk = 0; chunk < kColumnChunks; ++chunk)
      a += partial[chunk * cols + c], b += partial[(kColumnChunks + chunk) * cols + c];
    first[c] = static_cast<float>(a);
    if (second) second[c] = static_cast<float>(b);
  }
}

// float accumulation for a layer's columns (a few thousand rows); double where a column runs
// over a whole batch's pixels (batch norm over NHWC: millions of rows at ResNet-50's sizes).
template <typename Acc = float, typename Values>
cudaError_t column_sums(Values values, long long rows, long long cols, float* first, float* second,
                        void* scratch, cudaStream_t stream) {
  Acc* partial = static_cast<Acc*>(scratch);
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), kColumnChunks), block(32, 8);
  column_partials_kernel<Acc><<<grid, block, 0, stream>>>(values, rows, cols, partial);
  finish_columns_kernel<Acc><<<grid_for(cols), kThreads, 0, stream>>>(partial, cols, first, second);
  return cudaGetLastError();
}

template <typename T>
const T* in(const void* p) {
  return static_cast<const T*>(p);
}
template <typename T>
T* out(void* p) {
  return static_cast<T*>(p);
}

}  // namespace
}  // namespace tb::cuda
