#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <algorithm>

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

// A probe block's mean: the sum of every thread's `sum` (kThreads of them) over `count`
// values, written by thread 0.
template <int kThreads>
__device__ void write_block_mean(double sum, int count, double* per_block_mean) {
  __shared__ double partial[kThreads];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) per_block_mean[blockIdx.x] = partial[0] / count;
}

__global__ void fma_peak_kernel(long long iterations, float one, float increment,
                                double* per_block_mean) {
  float acc[kPeakChains] = {};
  for (long long i = 0; i < iterations; ++i)
#pragma unroll
    for (int chain = 0; chain < kPeakChains; ++chain) acc[chain] = fmaf(acc[chain], one, increment);
  double sum = 0;
  for (float value : acc) sum += value;
  write_block_mean<kPeakThreadsPerBlock>(sum, kPeakThreadsPerBlock * kPeakChains, per_block_mean);
}

// The K of the 16x16xK WMMA shape each dtype's Tensor Core probe uses.
constexpr int tensor_peak_k(DType dtype) {
  return dtype == DType::tf32 ? 8 : 16;
}

template <typename Precision, int K, typename Element>
__global__ void tensor_peak_kernel(long long iterations, Element a_value, Element b_value,
                                   double* per_block_mean) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, K, Precision, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, K, Precision, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, K, float> acc[kTensorPeakChains];
  wmma::fill_fragment(a, a_value);
  wmma::fill_fragment(b, b_value);
  for (auto& c : acc) wmma::fill_fragment(c, 0.0f);
  for (long long i = 0; i < iterations; ++i)
#pragma unroll
    for (int c = 0; c < kTensorPeakChains; ++c) wmma::mma_sync(acc[c], a, b, acc[c]);
  double sum = 0;
  for (const auto& c : acc)
    for (int e = 0; e < c.num_elements; ++e) sum += c.x[e];
  // Every warp's chains hold 16 x 16 accumulator elements each.
  write_block_mean<kTensorPeakWarps * 32>(sum, kTensorPeakWarps * kTensorPeakChains * 256,
                                          per_block_mean);
}

// values[i] = data[offsets[i]] for `count` elements of type T (1, 2, 4 or 8 bytes).
template <typename T>
__global__ void gather_kernel(const T* data, const long long* offsets, T* values, long long count) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    values[i] = data[offsets[i]];
}

}  // namespace

double tensor_peak_flops(DType dtype, long long iterations, int blocks) {
  return 2.0 * 16 * 16 * tensor_peak_k(dtype) * static_cast<double>(iterations) *
         kTensorPeakChains * kTensorPeakWarps * blocks;
}

cudaError_t launch_tensor_peak(DType dtype, long long iterations, double* per_block_mean,
                               int blocks, cudaStream_t stream) {
  // Each of the K products of a round is increment / K: a = 2^-8, b = increment / K * 2^8
  // (powers of two, exact in every input format).
  const float a = 1.0f / 256, b = static_cast<float>(peak_increment_per_iteration(dtype) /
                                                     tensor_peak_k(dtype) * 256);
  constexpr int threads = kTensorPeakWarps * 32;
  using namespace nvcuda;
  switch (dtype) {
    case DType::bf16:
      tensor_peak_kernel<__nv_bfloat16, 16><<<blocks, threads, 0, stream>>>(
          iterations, __float2bfloat16(a), __float2bfloat16(b), per_block_mean);
      break;
    case DType::f16:
      tensor_peak_kernel<__half, 16><<<blocks, threads, 0, stream>>>(
          iterations, __float2half(a), __float2half(b), per_block_mean);
      break;
    case DType::tf32:
      tensor_peak_kernel<wmma::precision::tf32, 8><<<blocks, threads, 0, stream>>>(
          iterations, a, b, per_block_mean);  // powers of two: already TF32 values
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

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

cudaError_t launch_gather(std::size_t element, const void* data, const long long* offsets,
                          long long count, void* values, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const auto grid =
      static_cast<unsigned>(std::min<long long>((count + kThreads - 1) / kThreads, 1 << 16));
  switch (element) {
    case 1:
      gather_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const unsigned char*>(data), offsets,
                                                   static_cast<unsigned char*>(values), count);
      break;
    case 2:
      gather_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const unsigned short*>(data),
                                                   offsets, static_cast<unsigned short*>(values),
                                                   count);
      break;
    case 4:
      gather_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const unsigned int*>(data), offsets,
                                                   static_cast<unsigned int*>(values), count);
      break;
    case 8:
      gather_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const unsigned long long*>(data),
                                                   offsets,
                                                   static_cast<unsigned long long*>(values), count);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace tb::cuda
