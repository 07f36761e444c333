// The cuda backend's own training kernels (training_kernels.h declares their launchers): loss
// scaling's unscale-and-check and the SGD, AdamW and LAMB updates on f32 flat buffers.
#include "backends/cuda/kernel_common.cuh"
#include "backends/cuda/training_kernels.h"
#include "backends/cuda/training_math.h"
#include "backends/optimizer_math.h"

namespace tb::cuda {
namespace {

// --- loss scaling and optimizers on f32 flat buffers ---

template <typename T>
__global__ void unscale_kernel(T* grads, long long n, float inverse_scale, int* found_nonfinite) {
  TB_GRID_STRIDE(i, n) {
    const float g = to_float(grads[i]) * inverse_scale;
    grads[i] = from_float<T>(g);
    if (!isfinite(g)) *found_nonfinite = 1;  // every writer stores the same value
  }
}

__global__ void sgd_kernel(float* weights, const float* grads, float* momentum, long long n,
                           float learning_rate, float mu, float weight_decay) {
  TB_GRID_STRIDE(i, n) {
    weights[i] =
        sgd_momentum_weight(learning_rate, mu, weight_decay, weights[i], grads[i], momentum[i]);
  }
}

__global__ void adamw_kernel(AdamFactors f, float* weights, const float* grads, float* m, float* v,
                             long long n) {
  TB_GRID_STRIDE(i, n) {
    float mi = m[i], vi = v[i];
    adam_moments(f, grads[i], mi, vi);
    m[i] = mi, v[i] = vi;
    weights[i] = adamw_weight(f, weights[i], mi, vi);
  }
}

// LAMB: grid (tensors, kLambChunks); each block owns one chunk of one tensor in both passes.
struct Chunk {
  long long begin, end;
};
__device__ Chunk lamb_chunk(const int* offsets) {
  const long long begin = offsets[blockIdx.x], end = offsets[blockIdx.x + 1];
  const long long per_chunk = (end - begin + gridDim.y - 1) / gridDim.y;
  const long long first = begin + blockIdx.y * per_chunk;
  return {first, min(end, first + per_chunk)};
}

__global__ void lamb_moments_kernel(AdamFactors f, const float* weights, const float* grads,
                                    float* m, float* v, const int* offsets, double* partial) {
  const Chunk chunk = lamb_chunk(offsets);
  float weights_squared = 0, updates_squared = 0;
  for (long long i = chunk.begin + threadIdx.x; i < chunk.end; i += blockDim.x) {
    float mi = m[i], vi = v[i];
    adam_moments(f, grads[i], mi, vi);
    m[i] = mi, v[i] = vi;
    const float u = lamb_update(f, weights[i], mi, vi);
    weights_squared += weights[i] * weights[i];
    updates_squared += u * u;
  }
  const double w = block_sum(static_cast<double>(weights_squared));
  const double u = block_sum(static_cast<double>(updates_squared));
  if (threadIdx.x == 0) {
    double* out = partial + 2 * (blockIdx.x * static_cast<long long>(gridDim.y) + blockIdx.y);
    out[0] = w, out[1] = u;
  }
}

__global__ void lamb_apply_kernel(AdamFactors f, float learning_rate, float* weights,
                                  const float* m, const float* v, const int* offsets,
                                  const double* partial) {
  const double* tensor = partial + 2 * blockIdx.x * static_cast<long long>(gridDim.y);
  double weight_norm = 0, update_norm = 0;
  for (unsigned chunk = 0; chunk < gridDim.y; ++chunk)
    weight_norm += tensor[2 * chunk], update_norm += tensor[2 * chunk + 1];
  const float step = lamb_step(learning_rate, weight_norm, update_norm);
  const Chunk chunk = lamb_chunk(offsets);
  for (long long i = chunk.begin + threadIdx.x; i < chunk.end; i += blockDim.x)
    weights[i] -= step * lamb_update(f, weights[i], m[i], v[i]);
}

}  // namespace

cudaError_t launch_unscale_gradients(const UnscaleGradientsOp& op, void* grads, float inverse_scale,
                                     std::int32_t* found_nonfinite, cudaStream_t stream) {
  if (const cudaError_t error = cudaMemsetAsync(found_nonfinite, 0, sizeof(std::int32_t), stream);
      error != cudaSuccess)
    return error;
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    unscale_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(out<T>(grads), op.count,
                                                                inverse_scale, found_nonfinite);
    return cudaGetLastError();
  });
}

std::size_t optimizer_scratch_bytes(const OptimizerOp& op) {
  return op.kind == OptimizerKind::lamb
             ? 2 * static_cast<std::size_t>(op.tensors) * kLambChunks * sizeof(double)
             : 0;
}

cudaError_t launch_optimizer(const OptimizerOp& op, float* weights, const float* grads,
                             float* first_moment, float* second_moment,
                             const std::int32_t* tensor_offsets, const float* hyper, void* scratch,
                             cudaStream_t stream) {
  if (op.kind == OptimizerKind::sgd_momentum) {
    sgd_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(weights, grads, first_moment, op.count,
                                                            hyper[0], hyper[1], hyper[2]);
    return cudaGetLastError();
  }
  const double step = hyper[5];
  const AdamFactors f =
      adam_factors({hyper[0], hyper[1], hyper[2], hyper[3], hyper[4],
                    static_cast<float>(1 - std::pow(static_cast<double>(hyper[1]), step)),
                    static_cast<float>(1 - std::pow(static_cast<double>(hyper[2]), step))});
  if (op.kind == OptimizerKind::adamw) {
    adamw_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(f, weights, grads, first_moment,
                                                              second_moment, op.count);
    return cudaGetLastError();
  }
  const dim3 grid(static_cast<unsigned>(op.tensors), kLambChunks);
  double* partial = static_cast<double*>(scratch);
  lamb_moments_kernel<<<grid, kThreads, 0, stream>>>(f, weights, grads, first_moment, second_moment,
                                                     tensor_offsets, partial);
  lamb_apply_kernel<<<grid, kThreads, 0, stream>>>(f, hyper[0], weights, first_moment,
                                                   second_moment, tensor_offsets, partial);
  return cudaGetLastError();
}

}  // namespace tb::cuda
