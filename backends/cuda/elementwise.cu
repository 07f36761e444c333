// The cuda backend's own training kernels (training_kernels.h declares their launchers):
// element-wise ops, casts, seeded fills, layout conversion, and the bias of a layer and its
// gradient.
#include "backends/cuda/kernel_common.cuh"
#include "backends/cuda/training_kernels.h"
#include "backends/cuda/training_math.h"

namespace tb::cuda {
namespace {

// --- element-wise ---

template <typename T>
__global__ void eltwise_kernel(EltwiseKind kind, bool forward, const T* first, const T* diff_dst,
                               T* out, long long n) {
  TB_GRID_STRIDE(i, n) {
    const float x = to_float(first[i]);  // forward: the input; backward: GELU's input or the output
    float y;
    if (forward) {
      y = kind == EltwiseKind::relu   ? (x > 0.0f ? x : 0.0f)
          : kind == EltwiseKind::gelu ? gelu(x)
                                      : tanhf(x);
    } else {
      const float dy = to_float(diff_dst[i]);
      y = kind == EltwiseKind::relu   ? relu_gradient(x, dy)
          : kind == EltwiseKind::gelu ? gelu_gradient(x, dy)
                                      : tanh_gradient(x, dy);
    }
    out[i] = from_float<T>(y);
  }
}

template <typename T>
__global__ void add_kernel(const T* x, const T* y, T* dst, long long n, bool relu) {
  TB_GRID_STRIDE(i, n) {
    const float sum = to_float(x[i]) + to_float(y[i]);
    dst[i] = from_float<T>(relu && !(sum > 0.0f) ? 0.0f : sum);
  }
}

template <typename T>
__global__ void dropout_kernel(const T* in, T* out, long long n, unsigned long long seed, int step,
                               unsigned long long threshold, float scale) {
  TB_GRID_STRIDE(i, n) {
    out[i] = from_float<T>(dropout_element(to_float(in[i]), seed, step, i, threshold, scale));
  }
}

template <typename From, typename To>
__global__ void cast_kernel(const From* src, To* dst, long long n) {
  TB_GRID_STRIDE(i, n) {
    dst[i] = from_float<To>(to_float(src[i]));
  }
}

template <typename T>
__global__ void fill_random_kernel(T* data, long long n, unsigned long long seed) {
  TB_GRID_STRIDE(i, n) {
    data[i] = from_float<T>(seeded_uniform(seed, i));
  }
}

// A fully connected layer's bias: first = sum of dy.
template <typename T>
struct BiasColumns {
  const T* diff_dst;
  __device__ void operator()(long long r, long long c, long long cols, float& first, float&) const {
    first += to_float(diff_dst[r * cols + c]);
  }
};

template <typename T>
__global__ void add_bias_kernel(const T* bias, T* dst, long long n, long long channels,
                                long long inner, bool relu) {
  TB_GRID_STRIDE(i, n) {
    const float value = to_float(dst[i]) + to_float(bias[(i / inner) % channels]);
    dst[i] = from_float<T>(relu ? fmaxf(value, 0.0f) : value);
  }
}

// dst[i] for each destination offset i, from the same element's offset in the other layout.
template <typename T>
__global__ void convert_channels_kernel(const T* src, T* dst, ActivationShape from,
                                        ActivationShape to, long long n) {
  TB_GRID_STRIDE(i, n) {
    const ActivationShape::Coordinates p = to.coordinates(i);
    dst[i] = src[from.offset(p.n, p.c, p.y, p.x)];
  }
}

}  // namespace

bool kernel_dtype(DType dtype) {
  return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
}

cudaError_t launch_eltwise(const EltwiseOp& op, const void* first, const void* diff_dst, void* dst,
                           cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    eltwise_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(
        op.kind, op.pass == Pass::forward, in<T>(first), in<T>(diff_dst), out<T>(dst), op.count);
    return cudaGetLastError();
  });
}

cudaError_t launch_add(const BinaryOp& op, const void* x, const void* y, void* dst,
                       cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(in<T>(x), in<T>(y), out<T>(dst),
                                                            op.count, op.fuse_relu);
    return cudaGetLastError();
  });
}

cudaError_t launch_dropout(const DropoutOp& op, const void* source, std::int32_t step, void* dst,
                           cudaStream_t stream) {
  return with_type(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(
        in<T>(source), out<T>(dst), op.count, op.seed, step, dropout_threshold(op.probability),
        static_cast<float>(1.0 / (1.0 - op.probability)));
    return cudaGetLastError();
  });
}

cudaError_t launch_cast(const CastOp& op, const void* src, void* dst, cudaStream_t stream) {
  return with_type(op.from, [&](auto from) {
    return with_type(op.to, [&](auto to) {
      using From = decltype(from);
      using To = decltype(to);
      cast_kernel<<<grid_for(op.count), kThreads, 0, stream>>>(in<From>(src), out<To>(dst),
                                                               op.count);
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_fill_random(DType dtype, void* data, std::int64_t count, std::uint64_t seed,
                               cudaStream_t stream) {
  return with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_random_kernel<<<grid_for(count), kThreads, 0, stream>>>(out<T>(data), count, seed);
    return cudaGetLastError();
  });
}

cudaError_t launch_convert_channels(std::size_t element, std::int64_t n, std::int64_t c,
                                    std::int64_t h, std::int64_t w, const void* src, void* dst,
                                    bool to_nhwc, cudaStream_t stream) {
  const ActivationShape from{n, c, h, w, !to_nhwc}, to{n, c, h, w, to_nhwc};
  const long long count = n * c * h * w;
  if (element == 2)
    convert_channels_kernel<<<grid_for(count), kThreads, 0, stream>>>(
        static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(dst), from, to, count);
  else if (element == 4)
    convert_channels_kernel<<<grid_for(count), kThreads, 0, stream>>>(
        static_cast<const std::uint32_t*>(src), static_cast<std::uint32_t*>(dst), from, to, count);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_add_bias(DType dtype, std::int64_t count, std::int64_t channels,
                            std::int64_t inner, bool relu, const void* bias, void* dst,
                            cudaStream_t stream) {
  return with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<<<grid_for(count), kThreads, 0, stream>>>(in<T>(bias), out<T>(dst), count,
                                                              channels, inner, relu);
    return cudaGetLastError();
  });
}

std::size_t column_sums_scratch_bytes(std::int64_t cols, std::size_t accumulator) {
  return 2 * static_cast<std::size_t>(kColumnChunks * cols) * accumulator;
}

cudaError_t launch_bias_gradient(DType dtype, std::int64_t rows, std::int64_t cols,
                                 const void* diff_dst, float* diff_bias, void* scratch,
                                 cudaStream_t stream) {
  return with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    return column_sums(BiasColumns<T>{in<T>(diff_dst)}, rows, cols, diff_bias, nullptr, scratch,
                       stream);
  });
}

}  // namespace tb::cuda
