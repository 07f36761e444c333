#include "backends/cuda/kernels.h"
#include "backends/cuda/stream_math.h"

namespace tb::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerMultiprocessor = 4;

// Pairs of doubles (16-byte loads and stores) in a grid-stride loop; an odd last element is
// done by thread 0.
__global__ void stream_kernel(StreamKernel kernel, const double* a, const double* b,
                              const double* c, double* out, long long n, double scalar) {
  const long long pairs = n / 2;
  const auto* a2 = reinterpret_cast<const double2*>(a);
  const auto* b2 = reinterpret_cast<const double2*>(b);
  const auto* c2 = reinterpret_cast<const double2*>(c);
  auto* out2 = reinterpret_cast<double2*>(out);
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const double2 x = a2[i], y = b2[i], z = c2[i];
    out2[i] = make_double2(stream_element(kernel, x.x, y.x, z.x, scalar),
                           stream_element(kernel, x.y, y.y, z.y, scalar));
  }
  if (n % 2 && blockIdx.x == 0 && threadIdx.x == 0)
    out[n - 1] = stream_element(kernel, a[n - 1], b[n - 1], c[n - 1], scalar);
}

__global__ void dot_kernel(const double* a, const double* b, double* result, long long n) {
  __shared__ double partial[kThreads];
  double sum = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n / 2;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const double2 x = reinterpret_cast<const double2*>(a)[i],
                  y = reinterpret_cast<const double2*>(b)[i];
    sum += x.x * y.x + x.y * y.y;
  }
  if (n % 2 && blockIdx.x == 0 && threadIdx.x == 0) sum += a[n - 1] * b[n - 1];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(result, partial[0]);
}

__global__ void fma_peak_kernel(long long iterations, float one, float increment,
                                double* per_block_mean) {
  float acc[kPeakChains] = {};
  for (long long i = 0; i < iterations; ++i)
#pragma unroll
    for (int chain = 0; chain < kPeakChains; ++chain) acc[chain] = fmaf(acc[chain], one, increment);
  __shared__ double partial[kPeakThreadsPerBlock];
  double sum = 0;
  for (float value : acc) sum += value;
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kPeakThreadsPerBlock / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    per_block_mean[blockIdx.x] = partial[0] / (kPeakThreadsPerBlock * kPeakChains);
}

}  // namespace

cudaError_t launch_stream(const StreamOp& op, double* a, double* b, double* c, double* result,
                          int multiprocessors, cudaStream_t stream) {
  const long long grid =
      stream_grid((op.n + 1) / 2, multiprocessors, kThreads, kBlocksPerMultiprocessor);
  switch (op.kernel) {
    case StreamKernel::copy:
      stream_kernel<<<grid, kThreads, 0, stream>>>(op.kernel, a, b, c, c, op.n, op.scalar);
      break;
    case StreamKernel::scale:
      stream_kernel<<<grid, kThreads, 0, stream>>>(op.kernel, a, b, c, b, op.n, op.scalar);
      break;
    case StreamKernel::add:
      stream_kernel<<<grid, kThreads, 0, stream>>>(op.kernel, a, b, c, c, op.n, op.scalar);
      break;
    case StreamKernel::triad:
      stream_kernel<<<grid, kThreads, 0, stream>>>(op.kernel, a, b, c, a, op.n, op.scalar);
      break;
    case StreamKernel::dot: {
      const cudaError_t zeroed = cudaMemsetAsync(result, 0, sizeof(double), stream);
      if (zeroed != cudaSuccess) return zeroed;
      dot_kernel<<<grid, kThreads, 0, stream>>>(a, b, result, op.n);
      break;
    }
  }
  return cudaGetLastError();
}

cudaError_t launch_fma_peak(long long iterations, float one, float increment,
                            double* per_block_mean, int blocks, cudaStream_t stream) {
  fma_peak_kernel<<<blocks, kPeakThreadsPerBlock, 0, stream>>>(iterations, one, increment,
                                                               per_block_mean);
  return cudaGetLastError();
}

}  // namespace tb::cuda
