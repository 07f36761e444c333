// The cuda backend's own training kernels (training_kernels.h declares their launchers): row gather
// and scatter-add.
#include "backends/cuda/kernel_common.cuh"
#include "backends/cuda/training_kernels.h"
#include "backends/cuda/training_math.h"

namespace tb::cuda {
namespace {

// --- embedding gather and scatter-add ---

template <typename T>
__global__ void gather_rows_kernel(const T* table, const int* ids, T* dst, long long tokens,
                                   long long dim) {
  TB_GRID_STRIDE(i, tokens * dim) {
    dst[i] = table[ids[i / dim] * dim + i % dim];
  }
}

__device__ __forceinline__ void add_to(float* target, float value) {
  atomicAdd(target, value);
}
__device__ __forceinline__ void add_to(__nv_bfloat16* target, float value) {
  atomicAdd(target, __float2bfloat16_rn(value));
}
__device__ __forceinline__ void add_to(__half* target, float value) {
  atomicAdd(target, __float2half_rn(value));
}

template <typename T, typename G>
__global__ void scatter_add_rows_kernel(const T* diff_dst, const int* ids, G* diff_table,
                                        long long tokens, long long dim) {
  TB_GRID_STRIDE(i, tokens * dim) {
    add_to(diff_table + ids[i / dim] * dim + i % dim, to_float(diff_dst[i]));
  }
}

}  // namespace

cudaError_t launch_embedding_forward(const EmbeddingOp& op, const void* table,
                                     const std::int32_t* ids, void* dst, cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    gather_rows_kernel<<<grid_for(op.tokens * op.dim), kThreads, 0, stream>>>(
        in<T>(table), ids, out<T>(dst), op.tokens, op.dim);
    return cudaGetLastError();
  });
}

cudaError_t launch_embedding_backward(const EmbeddingOp& op, const void* diff_dst,
                                      const std::int32_t* ids, void* diff_table,
                                      cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    return with_type(embedding_table_grad_dtype(op), [&](auto grad_tag) {
      using G = decltype(grad_tag);
      if (!op.accumulate)
        if (const cudaError_t error = cudaMemsetAsync(
                diff_table, 0, static_cast<std::size_t>(op.vocab * op.dim) * sizeof(G), stream);
            error != cudaSuccess)
          return error;
      scatter_add_rows_kernel<<<grid_for(op.tokens * op.dim), kThreads, 0, stream>>>(
          in<T>(diff_dst), ids, out<G>(diff_table), op.tokens, op.dim);
      return cudaGetLastError();
    });
  });
}

}  // namespace tb::cuda
