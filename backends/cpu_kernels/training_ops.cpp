#include "backends/cpu_kernels/training_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu_kernels/vector_kernels.h"
#include "backends/host/host_plan.h"
#include "backends/low_precision.h"
#include "backends/operands.h"
#include "backends/optimizer_math.h"
#include "backends/product_reference.h"
#include "backends/seeded.h"

namespace tb::cpu {
namespace {

using Index = std::int64_t;

// A plan whose work is one function over the operand buffers.
class KernelPlan final : public CpuPlan {
 public:
  using Kernel = std::function<void(const BoundOperands&)>;
  KernelPlan(std::vector<OperandSpec> operands, std::string implementation, Kernel kernel,
             bool reference = false)
      : kernel_(std::move(kernel)) {
    operands_ = std::move(operands);
    implementation_ = std::move(implementation);
    is_reference_ = reference;
  }
  Status run(std::span<const Buffer> operands, Buffer) override {
    kernel_(BoundOperands(operands_, operands));
    return Status::Ok();
  }

 private:
  Kernel kernel_;
};

// The f32 (and bf16) paths run the plan's kernel table (vector_kernels.h); the templates' plain
// loops are the f64 reference.
BatchNormShape batch_norm_shape(const BatchNormOp& op) {
  return {op.mb, op.channels, op.h * op.w, op.epsilon};
}
PoolShape pool_shape(const PoolOp& op) {
  return {op.mb * op.channels,
          op.ih,
          op.iw,
          op.oh(),
          op.ow(),
          op.kh,
          op.kw,
          op.sh,
          op.sw,
          op.ph,
          op.pw};
}

// --- batch norm (per channel over N, H, W), optionally followed by ReLU ---

template <typename T>
void batch_norm_forward(const CpuKernels& k, const BatchNormOp& op, const BoundOperands& b) {
  const T* src = b.in<T>("src");
  const T *gamma = b.in<T>("gamma"), *beta = b.in<T>("beta");
  T* dst = b.out<T>("dst");
  T *mean = b.out<T>("mean"), *variance = b.out<T>("variance");
  T *running_mean = b.out<T>("running_mean"), *running_var = b.out<T>("running_var");
  std::int32_t* mask = b.out_if<std::int32_t>("relu_mask");
  const Index plane = op.h * op.w, reduced = op.mb * plane;
  if constexpr (std::is_same_v<T, float>) {
    k.batch_norm_forward_f32(batch_norm_shape(op), src, gamma, beta, dst, mean, variance, mask);
    return update_running_stats(mean, variance, op.channels, reduced, op.momentum, running_mean,
                                running_var);
  }
#pragma omp parallel for schedule(static)
  for (Index c = 0; c < op.channels; ++c) {
    double sum = 0;
    for (Index n = 0; n < op.mb; ++n) {
      const T* x = src + (n * op.channels + c) * plane;
      for (Index i = 0; i < plane; ++i) sum += x[i];
    }
    const double mu = sum / static_cast<double>(reduced);
    double squares = 0;  // two passes: no cancellation
    for (Index n = 0; n < op.mb; ++n) {
      const T* x = src + (n * op.channels + c) * plane;
      for (Index i = 0; i < plane; ++i) squares += (x[i] - mu) * (x[i] - mu);
    }
    const double var = squares / static_cast<double>(reduced);
    const double scale = gamma[c] / std::sqrt(var + op.epsilon);
    for (Index n = 0; n < op.mb; ++n) {
      const Index offset = (n * op.channels + c) * plane;
      for (Index i = 0; i < plane; ++i) {
        T y = static_cast<T>((src[offset + i] - mu) * scale + beta[c]);
        if (mask) {
          mask[offset + i] = y > 0;
          y = y > 0 ? y : T(0);
        }
        dst[offset + i] = y;
      }
    }
    mean[c] = static_cast<T>(mu);
    variance[c] = static_cast<T>(var);
  }
  update_running_stats(mean, variance, op.channels, reduced, op.momentum, running_mean,
                       running_var);
}

template <typename T>
void batch_norm_inference(const CpuKernels& k, const BatchNormOp& op, const BoundOperands& b) {
  const T* src = b.in<T>("src");
  const T *gamma = b.in<T>("gamma"), *beta = b.in<T>("beta");
  const T *running_mean = b.in<T>("running_mean"), *running_var = b.in<T>("running_var");
  T* dst = b.out<T>("dst");
  if constexpr (std::is_same_v<T, float>)
    return k.batch_norm_inference_f32(batch_norm_shape(op), src, gamma, beta, running_mean,
                                      running_var, dst, op.fuse_relu);
  const Index plane = op.h * op.w;
#pragma omp parallel for schedule(static) collapse(2)
  for (Index n = 0; n < op.mb; ++n)
    for (Index c = 0; c < op.channels; ++c) {
      const double scale = gamma[c] / std::sqrt(static_cast<double>(running_var[c]) + op.epsilon);
      const Index offset = (n * op.channels + c) * plane;
      for (Index i = 0; i < plane; ++i) {
        const T y = static_cast<T>((src[offset + i] - running_mean[c]) * scale + beta[c]);
        dst[offset + i] = op.fuse_relu && !(y > 0) ? T(0) : y;
      }
    }
}

template <typename T>
void batch_norm_backward(const CpuKernels& k, const BatchNormOp& op, const BoundOperands& b) {
  const T *src = b.in<T>("src"), *diff_dst = b.in<T>("diff_dst"), *gamma = b.in<T>("gamma");
  const T *mean = b.in<T>("mean"), *variance = b.in<T>("variance");
  const std::int32_t* mask = b.in_if<std::int32_t>("relu_mask");
  T *diff_src = b.out<T>("diff_src"), *diff_gamma = b.out<T>("diff_gamma"),
    *diff_beta = b.out<T>("diff_beta");
  if constexpr (std::is_same_v<T, float>)
    return k.batch_norm_backward_f32(batch_norm_shape(op), src, diff_dst, gamma, mean, variance,
                                     mask, diff_src, diff_gamma, diff_beta);
  const Index plane = op.h * op.w, reduced = op.mb * plane;
  auto dy = [&](Index i) { return mask && !mask[i] ? 0.0 : static_cast<double>(diff_dst[i]); };
#pragma omp parallel for schedule(static)
  for (Index c = 0; c < op.channels; ++c) {
    const double inv_std = 1.0 / std::sqrt(static_cast<double>(variance[c]) + op.epsilon);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (Index n = 0; n < op.mb; ++n) {
      const Index offset = (n * op.channels + c) * plane;
      for (Index i = offset; i < offset + plane; ++i) {
        sum_dy += dy(i);
        sum_dy_xhat += dy(i) * (src[i] - mean[c]) * inv_std;
      }
    }
    const double count = static_cast<double>(reduced);
    for (Index n = 0; n < op.mb; ++n) {
      const Index offset = (n * op.channels + c) * plane;
      for (Index i = offset; i < offset + plane; ++i) {
        const double xhat = (src[i] - mean[c]) * inv_std;
        diff_src[i] = static_cast<T>(gamma[c] * inv_std / count *
                                     (count * dy(i) - sum_dy - xhat * sum_dy_xhat));
      }
    }
    diff_gamma[c] = static_cast<T>(sum_dy_xhat);
    diff_beta[c] = static_cast<T>(sum_dy);
  }
}

// --- element-wise ---

template <typename T>
void relu_forward(const CpuKernels& k, Index count, const BoundOperands& b) {
  const T* src = b.in<T>("src");
  T* dst = b.out<T>("dst");
  if constexpr (std::is_same_v<T, float>) return k.relu_forward_f32(count, src, dst);
#pragma omp parallel for simd schedule(static)
  for (Index i = 0; i < count; ++i) dst[i] = src[i] > 0 ? src[i] : T(0);
}

template <typename T>
void relu_backward(const CpuKernels& k, Index count, const BoundOperands& b) {
  const T *dst = b.in<T>("dst"), *diff_dst = b.in<T>("diff_dst");
  T* diff_src = b.out<T>("diff_src");
  if constexpr (std::is_same_v<T, float>)
    return k.relu_backward_f32(count, dst, diff_dst, diff_src);
#pragma omp parallel for simd schedule(static)
  for (Index i = 0; i < count; ++i) diff_src[i] = dst[i] > 0 ? diff_dst[i] : T(0);
}

template <typename T>
void add(const CpuKernels& k, const BinaryOp& op, const BoundOperands& b) {
  const T *x = b.in<T>("src0"), *y = b.in<T>("src1");
  T* dst = b.out<T>("dst");
  if constexpr (std::is_same_v<T, float>) return k.add_f32(op.count, x, y, dst, op.fuse_relu);
  if (op.fuse_relu) {
#pragma omp parallel for simd schedule(static)
    for (Index i = 0; i < op.count; ++i) dst[i] = std::max(x[i] + y[i], T(0));
  } else {
#pragma omp parallel for simd schedule(static)
    for (Index i = 0; i < op.count; ++i) dst[i] = x[i] + y[i];
  }
}

// GELU with erf, as BERT defines it: x * Phi(x).
template <typename T>
void gelu_forward(Index count, const BoundOperands& b) {
  const T* src = b.in<T>("src");
  T* dst = b.out<T>("dst");
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i)
    dst[i] = static_cast<T>(0.5 * src[i] * (1.0 + std::erf(src[i] / std::numbers::sqrt2)));
}

template <typename T>
void gelu_backward(Index count, const BoundOperands& b) {
  const T *src = b.in<T>("src"), *diff_dst = b.in<T>("diff_dst");
  T* diff_src = b.out<T>("diff_src");
  const double density = 1.0 / std::sqrt(2 * std::numbers::pi);
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) {
    const double x = src[i];
    const double cdf = 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2));
    diff_src[i] = static_cast<T>(diff_dst[i] * (cdf + x * density * std::exp(-0.5 * x * x)));
  }
}

template <typename T>
void tanh_forward(Index count, const BoundOperands& b) {
  const T* src = b.in<T>("src");
  T* dst = b.out<T>("dst");
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) dst[i] = static_cast<T>(std::tanh(static_cast<double>(src[i])));
}

template <typename T>
void tanh_backward(Index count, const BoundOperands& b) {
  const T *dst = b.in<T>("dst"), *diff_dst = b.in<T>("diff_dst");
  T* diff_src = b.out<T>("diff_src");
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i)
    diff_src[i] = static_cast<T>(diff_dst[i] * (1.0 - static_cast<double>(dst[i]) * dst[i]));
}

// --- layer norm, softmax, row gather ---

// Statistics, scale and shift: f32 for low-precision data, f64 for the reference.
template <typename T>
using StatisticsType = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
void layer_norm_forward(const LayerNormOp& op, const BoundOperands& b) {
  using C = StatisticsType<T>;
  const T* src = b.in<T>("src");
  const C *gamma = b.in<C>("gamma"), *beta = b.in<C>("beta");
  T* dst = b.out<T>("dst");
  C *mean = b.out<C>("mean"), *variance = b.out<C>("variance");
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < op.rows; ++r) {
    const T* x = src + r * op.cols;
    double sum = 0, squares = 0;
    for (Index c = 0; c < op.cols; ++c) sum += x[c];
    const double mu = sum / static_cast<double>(op.cols);
    for (Index c = 0; c < op.cols; ++c) squares += (x[c] - mu) * (x[c] - mu);
    const double var = squares / static_cast<double>(op.cols);
    const double rstd = 1.0 / std::sqrt(var + op.epsilon);
    for (Index c = 0; c < op.cols; ++c)
      dst[r * op.cols + c] = static_cast<T>((x[c] - mu) * rstd * gamma[c] + beta[c]);
    mean[r] = static_cast<C>(mu);
    variance[r] = static_cast<C>(var);
  }
}

template <typename T>
void layer_norm_backward(const LayerNormOp& op, const BoundOperands& b) {
  using C = StatisticsType<T>;
  const T *src = b.in<T>("src"), *diff_dst = b.in<T>("diff_dst");
  const C *gamma = b.in<C>("gamma"), *mean = b.in<C>("mean"), *variance = b.in<C>("variance");
  T* diff_src = b.out<T>("diff_src");
  C *diff_gamma = b.out<C>("diff_gamma"), *diff_beta = b.out<C>("diff_beta");
  const double n = static_cast<double>(op.cols);
  auto rstd_of = [&](Index r) {
    return 1.0 / std::sqrt(static_cast<double>(variance[r]) + op.epsilon);
  };
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < op.rows; ++r) {
    const double rstd = rstd_of(r);
    double sum_g = 0, sum_g_xhat = 0;  // over the row, of g = dy * gamma
    for (Index c = 0; c < op.cols; ++c) {
      const double g = diff_dst[r * op.cols + c] * static_cast<double>(gamma[c]);
      sum_g += g;
      sum_g_xhat += g * (src[r * op.cols + c] - mean[r]) * rstd;
    }
    for (Index c = 0; c < op.cols; ++c) {
      const double xhat = (src[r * op.cols + c] - mean[r]) * rstd;
      const double g = diff_dst[r * op.cols + c] * static_cast<double>(gamma[c]);
      diff_src[r * op.cols + c] = static_cast<T>(rstd / n * (n * g - sum_g - xhat * sum_g_xhat));
    }
  }
  // Column sums over rows: a second pass, parallel over columns.
#pragma omp parallel for schedule(static)
  for (Index c = 0; c < op.cols; ++c) {
    double dg = 0, db = 0;
    for (Index r = 0; r < op.rows; ++r) {
      const double dy = diff_dst[r * op.cols + c];
      dg += dy * (src[r * op.cols + c] - mean[r]) * rstd_of(r);
      db += dy;
    }
    diff_gamma[c] = static_cast<C>(dg);
    diff_beta[c] = static_cast<C>(db);
  }
}

template <typename T>
void softmax_forward(const CpuKernels& k, const SoftmaxOp& op, const BoundOperands& b) {
  const T* src = b.in<T>("src");
  const float* mask = b.in_if<float>("mask");
  T* dst = b.out<T>("dst");
  if constexpr (std::is_same_v<T, float>) {
    return k.softmax_rows_f32(src, mask, dst, op.rows, op.cols, op.scale, op.rows_per_mask);
  } else if constexpr (std::is_same_v<T, Bf16>) {
    return k.softmax_rows_bf16(&src->bits, mask, &dst->bits, op.rows, op.cols, op.scale,
                               op.rows_per_mask);
  }
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < op.rows; ++r) {
    const float* bias = mask ? mask + (r / op.rows_per_mask) * op.cols : nullptr;
    auto logit = [&](Index c) {
      return op.scale * static_cast<double>(src[r * op.cols + c]) + (bias ? bias[c] : 0.0);
    };
    double top = -INFINITY;
    for (Index c = 0; c < op.cols; ++c) top = std::max(top, logit(c));
    double sum = 0;
    for (Index c = 0; c < op.cols; ++c) sum += std::exp(logit(c) - top);
    for (Index c = 0; c < op.cols; ++c)
      dst[r * op.cols + c] = static_cast<T>(std::exp(logit(c) - top) / sum);
  }
}

template <typename T>
void softmax_backward(const SoftmaxOp& op, const BoundOperands& b) {
  const T *dst = b.in<T>("dst"), *diff_dst = b.in<T>("diff_dst");
  T* diff_src = b.out<T>("diff_src");
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < op.rows; ++r) {
    double dot = 0;
    for (Index c = 0; c < op.cols; ++c)
      dot += static_cast<double>(diff_dst[r * op.cols + c]) * dst[r * op.cols + c];
    for (Index c = 0; c < op.cols; ++c)
      diff_src[r * op.cols + c] =
          static_cast<T>(op.scale * dst[r * op.cols + c] * (diff_dst[r * op.cols + c] - dot));
  }
}

// --- fused attention, f64 only: the reference for the libraries' fused kernels ---

// Element (b, s, h, d) of a head-interleaved [batch, sequence, heads, head_dim] tensor.
struct InterleavedRows {
  const AttentionOp& op;
  Index at(Index b, Index s, Index h) const {
    return ((b * op.sequence + s) * op.heads + h) * op.head_dim;
  }
  double dot(const double* x, const double* y) const {
    double sum = 0;
    for (Index d = 0; d < op.head_dim; ++d) sum += x[d] * y[d];
    return sum;
  }
};

Index key_length(const AttentionOp& op, const std::int32_t* lengths, Index b) {
  return std::clamp<Index>(lengths[b], 0, op.sequence);
}

void attention_forward(const AttentionOp& op, const BoundOperands& b) {
  const double *q = b.in<double>("q"), *k = b.in<double>("k"), *v = b.in<double>("v");
  const std::int32_t* lengths = b.in<std::int32_t>("key_lengths");
  double *out = b.out<double>("out"), *stats = b.out<double>("stats");
  const InterleavedRows rows{op};
#pragma omp parallel for collapse(2) schedule(static)
  for (Index n = 0; n < op.batch; ++n)
    for (Index h = 0; h < op.heads; ++h) {
      const Index keys = key_length(op, lengths, n);
      std::vector<double> scores(static_cast<std::size_t>(keys));
      for (Index i = 0; i < op.sequence; ++i) {
        const double* query = q + rows.at(n, i, h);
        double top = -INFINITY;
        for (Index j = 0; j < keys; ++j) {
          scores[j] = op.scale * rows.dot(query, k + rows.at(n, j, h));
          top = std::max(top, scores[j]);
        }
        double sum = 0;
        for (Index j = 0; j < keys; ++j) sum += std::exp(scores[j] - top);
        const double log_sum_exp = top + std::log(sum);
        stats[(n * op.heads + h) * op.sequence + i] = log_sum_exp;
        double* o = out + rows.at(n, i, h);
        std::fill(o, o + op.head_dim, 0.0);
        for (Index j = 0; j < keys; ++j) {
          const double p = std::exp(scores[j] - log_sum_exp);
          const double* value = v + rows.at(n, j, h);
          for (Index d = 0; d < op.head_dim; ++d) o[d] += p * value[d];
        }
      }
    }
}

// From the forward's log-sum-exp, as flash attention's backward: P = exp(scale Q K^T - stats),
// dP = dO V^T, dS = P (dP - rowsum(dO * O)), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
void attention_backward(const AttentionOp& op, const BoundOperands& b) {
  const double *q = b.in<double>("q"), *k = b.in<double>("k"), *v = b.in<double>("v");
  const std::int32_t* lengths = b.in<std::int32_t>("key_lengths");
  const double *out = b.in<double>("out"), *stats = b.in<double>("stats"),
               *diff_out = b.in<double>("diff_out");
  double *diff_q = b.out<double>("diff_q"), *diff_k = b.out<double>("diff_k"),
         *diff_v = b.out<double>("diff_v");
  const InterleavedRows rows{op};
#pragma omp parallel for collapse(2) schedule(static)
  for (Index n = 0; n < op.batch; ++n)
    for (Index h = 0; h < op.heads; ++h) {
      for (Index i = 0; i < op.sequence; ++i)
        for (double* grad : {diff_q, diff_k, diff_v})
          std::fill(grad + rows.at(n, i, h), grad + rows.at(n, i, h) + op.head_dim, 0.0);
      const Index keys = key_length(op, lengths, n);
      for (Index i = 0; i < op.sequence; ++i) {
        const Index row = rows.at(n, i, h);
        const double delta = rows.dot(diff_out + row, out + row);
        const double log_sum_exp = stats[(n * op.heads + h) * op.sequence + i];
        for (Index j = 0; j < keys; ++j) {
          const Index key = rows.at(n, j, h);
          const double p = std::exp(op.scale * rows.dot(q + row, k + key) - log_sum_exp);
          const double dp = rows.dot(diff_out + row, v + key);
          const double ds = op.scale * p * (dp - delta);
          for (Index d = 0; d < op.head_dim; ++d) {
            diff_q[row + d] += ds * k[key + d];
            diff_k[key + d] += ds * q[row + d];
            diff_v[key + d] += p * diff_out[row + d];
          }
        }
      }
    }
}

template <typename T>
void embedding_forward(const EmbeddingOp& op, const BoundOperands& b) {
  const T* table = b.in<T>("table");
  const std::int32_t* ids = b.in<std::int32_t>("ids");
  T* dst = b.out<T>("dst");
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < op.tokens; ++t)
    std::copy(table + ids[t] * op.dim, table + (ids[t] + 1) * op.dim, dst + t * op.dim);
}

// G: the table gradient's type (fp32 for a bf16 weight table: fp32 master gradients).
template <typename T, typename G>
void embedding_backward(const EmbeddingOp& op, const BoundOperands& b) {
  const T* diff_dst = b.in<T>("diff_dst");
  const std::int32_t* ids = b.in<std::int32_t>("ids");
  G* diff_table = b.out<G>("diff_table");
  if (!op.accumulate) std::fill(diff_table, diff_table + op.vocab * op.dim, G(0));
    // Parallel over embedding columns: a row repeats across tokens, a column never collides.
#pragma omp parallel for schedule(static)
  for (Index d = 0; d < op.dim; ++d)
    for (Index t = 0; t < op.tokens; ++t)
      diff_table[ids[t] * op.dim + d] += static_cast<G>(diff_dst[t * op.dim + d]);
}

// --- pooling ---

template <typename T>
void max_pool_forward(const CpuKernels& k, const PoolOp& op, const BoundOperands& b) {
  const T* src = b.in<T>("src");
  T* dst = b.out<T>("dst");
  std::int32_t* indices = b.out<std::int32_t>("indices");
  if constexpr (std::is_same_v<T, float>)
    return k.max_pool_forward_f32(pool_shape(op), src, dst, indices);
  const Index oh = op.oh(), ow = op.ow();
#pragma omp parallel for schedule(static)
  for (Index plane = 0; plane < op.mb * op.channels; ++plane) {
    const T* x = src + plane * op.ih * op.iw;
    for (Index y = 0; y < oh; ++y)
      for (Index xo = 0; xo < ow; ++xo) {
        T best = -std::numeric_limits<T>::infinity();
        std::int32_t where = -1;
        for (Index ky = 0; ky < op.kh; ++ky)
          for (Index kx = 0; kx < op.kw; ++kx) {
            const Index iy = y * op.sh - op.ph + ky, ix = xo * op.sw - op.pw + kx;
            if (iy < 0 || iy >= op.ih || ix < 0 || ix >= op.iw) continue;
            if (where < 0 || x[iy * op.iw + ix] > best) {
              best = x[iy * op.iw + ix];
              where = static_cast<std::int32_t>(iy * op.iw + ix);
            }
          }
        dst[(plane * oh + y) * ow + xo] = best;
        indices[(plane * oh + y) * ow + xo] = where;
      }
  }
}

template <typename T>
void max_pool_backward(const CpuKernels& k, const PoolOp& op, const BoundOperands& b) {
  const T* diff_dst = b.in<T>("diff_dst");
  const std::int32_t* indices = b.in<std::int32_t>("indices");
  T* diff_src = b.out<T>("diff_src");
  if constexpr (std::is_same_v<T, float>)
    return k.max_pool_backward_f32(pool_shape(op), diff_dst, indices, diff_src);
  const Index outputs = op.oh() * op.ow(), inputs = op.ih * op.iw;
#pragma omp parallel for schedule(static)
  for (Index plane = 0; plane < op.mb * op.channels; ++plane) {
    T* dx = diff_src + plane * inputs;
    std::fill(dx, dx + inputs, T(0));
    for (Index o = 0; o < outputs; ++o)  // -1: a window wholly in the padding
      if (const std::int32_t at = indices[plane * outputs + o]; at >= 0)
        dx[at] += diff_dst[plane * outputs + o];
  }
}

template <typename T>
void average_pool_forward(const CpuKernels& k, const PoolOp& op, const BoundOperands& b) {
  const T* src = b.in<T>("src");
  T* dst = b.out<T>("dst");
  if constexpr (std::is_same_v<T, float>)
    return k.average_pool_forward_f32(pool_shape(op), src, dst);
  const Index inputs = op.ih * op.iw;
#pragma omp parallel for schedule(static)
  for (Index plane = 0; plane < op.mb * op.channels; ++plane) {
    double sum = 0;
    for (Index i = 0; i < inputs; ++i) sum += src[plane * inputs + i];
    dst[plane] = static_cast<T>(sum / static_cast<double>(inputs));
  }
}

template <typename T>
void average_pool_backward(const CpuKernels& k, const PoolOp& op, const BoundOperands& b) {
  const T* diff_dst = b.in<T>("diff_dst");
  T* diff_src = b.out<T>("diff_src");
  if constexpr (std::is_same_v<T, float>)
    return k.average_pool_backward_f32(pool_shape(op), diff_dst, diff_src);
  const Index inputs = op.ih * op.iw;
#pragma omp parallel for schedule(static)
  for (Index plane = 0; plane < op.mb * op.channels; ++plane)
    std::fill(diff_src + plane * inputs, diff_src + (plane + 1) * inputs,
              static_cast<T>(diff_dst[plane] / static_cast<double>(inputs)));
}

// --- convolution, fully connected and GEMM, f64 reference: each output element from
// backends/product_reference.h, the loops workload validation and the op check also use ---

// Every element (i, j, k, l) of a row-major [d0, d1, d2, d3] output, the first two dimensions
// shared among the threads.
template <typename Element>
void fill_4d(double* out, const std::array<Index, 4>& d, Element element) {
#pragma omp parallel for collapse(2) schedule(static)
  for (Index i = 0; i < d[0]; ++i)
    for (Index j = 0; j < d[1]; ++j)
      for (Index k = 0; k < d[2]; ++k)
        for (Index l = 0; l < d[3]; ++l)
          out[((i * d[1] + j) * d[2] + k) * d[3] + l] = element(i, j, k, l);
}

void conv_forward(const ConvOp& op, const BoundOperands& b) {
  const double *src = b.in<double>("src"), *weights = b.in<double>("weights");
  const double* bias = b.in_if<double>("bias");
  fill_4d(b.out<double>("dst"), {op.mb, op.oc, op.oh(), op.ow()},
          [&](Index n, Index oc, Index y, Index x) {
            reference::ProductSum sum =
                reference::conv_forward_element(op, src, weights, n, oc, y, x);
            if (bias) reference::add_bias(sum, bias[oc], op.epilogue == ConvEpilogue::bias_relu);
            return sum.value;
          });
}

void conv_backward_data(const ConvOp& op, const BoundOperands& b) {
  const double *diff_dst = b.in<double>("diff_dst"), *weights = b.in<double>("weights");
  fill_4d(b.out<double>("diff_src"), {op.mb, op.ic, op.ih, op.iw},
          [&](Index n, Index ic, Index y, Index x) {
            return reference::conv_backward_data_element(op, diff_dst, weights, n, ic, y, x).value;
          });
}

void conv_backward_weights(const ConvOp& op, const BoundOperands& b) {
  const double *src = b.in<double>("src"), *diff_dst = b.in<double>("diff_dst");
  fill_4d(
      b.out<double>("diff_weights"), {op.oc, op.ic, op.kh, op.kw},
      [&](Index oc, Index ic, Index ky, Index kx) {
        return reference::conv_backward_weights_element(op, src, diff_dst, oc, ic, ky, kx).value;
      });
}

void fully_connected(const FullyConnectedOp& op, const BoundOperands& b) {
  switch (op.direction) {
    case ConvDirection::forward: {
      const double *src = b.in<double>("src"), *weights = b.in<double>("weights"),
                   *bias = b.in<double>("bias");
      double* dst = b.out<double>("dst");
#pragma omp parallel for collapse(2) schedule(static)
      for (Index n = 0; n < op.mb; ++n)
        for (Index o = 0; o < op.out; ++o) {
          reference::ProductSum sum = reference::fully_connected_element(op, src, weights, n, o);
          reference::add_bias(sum, bias[o], false);
          dst[n * op.out + o] = sum.value;
        }
      return;
    }
    case ConvDirection::backward_data: {
      const double *diff_dst = b.in<double>("diff_dst"), *weights = b.in<double>("weights");
      double* diff_src = b.out<double>("diff_src");
#pragma omp parallel for collapse(2) schedule(static)
      for (Index n = 0; n < op.mb; ++n)
        for (Index i = 0; i < op.in; ++i)
          diff_src[n * op.in + i] =
              reference::fully_connected_element(op, diff_dst, weights, n, i).value;
      return;
    }
    case ConvDirection::backward_weights: {
      const double *src = b.in<double>("src"), *diff_dst = b.in<double>("diff_dst");
      double *diff_weights = b.out<double>("diff_weights"), *diff_bias = b.out<double>("diff_bias");
#pragma omp parallel for schedule(static)
      for (Index o = 0; o < op.out; ++o) {
        diff_bias[o] = reference::fully_connected_bias_gradient_element(op, diff_dst, o).value;
        for (Index i = 0; i < op.in; ++i)
          diff_weights[o * op.in + i] =
              reference::fully_connected_element(op, diff_dst, src, o, i).value;
      }
      return;
    }
  }
}

// Strided-batched GEMM over batch and heads: C = alpha op(A) op(B) + beta C.
void gemm(const GemmOp& op, const BoundOperands& b) {
  const double *a = b.in<double>("a"), *bm = b.in<double>("b");
  double* c = b.out<double>("c");
  const GemmOperandLayout lc = gemm_layout(op, GemmOperand::c);
#pragma omp parallel for collapse(3) schedule(static)
  for (Index batch = 0; batch < op.batch; ++batch)
    for (Index head = 0; head < op.heads; ++head)
      for (Index i = 0; i < op.m; ++i)
        for (Index j = 0; j < op.n; ++j) {
          double& out = c[batch * lc.batch + head * lc.head + i * lc.row + j * lc.col];
          out = reference::gemm_element(op, a, bm, batch, head, i, j).value +
                (op.beta != 0 ? op.beta * out : 0.0);
        }
}

// --- loss and optimizer ---

template <typename T>
void softmax_cross_entropy_forward(const CpuKernels& k, const SoftmaxCrossEntropyOp& op,
                                   const BoundOperands& b) {
  const T* logits = b.in<T>("logits");
  const std::int32_t* labels = b.in<std::int32_t>("labels");
  T* probabilities = b.out<T>("probabilities");
  T* loss_out = b.out<T>("loss");
  if constexpr (std::is_same_v<T, float>) {
    *loss_out = static_cast<T>(
        k.softmax_cross_entropy_f32(logits, labels, probabilities, op.rows, op.classes) /
        static_cast<double>(op.rows));
    return;
  }
  double loss = 0;
#pragma omp parallel for reduction(+ : loss) schedule(static)
  for (Index r = 0; r < op.rows; ++r) {
    const T* z = logits + r * op.classes;
    const double top = *std::max_element(z, z + op.classes);
    double sum = 0;
    for (Index c = 0; c < op.classes; ++c) sum += std::exp(z[c] - top);
    for (Index c = 0; c < op.classes; ++c)
      probabilities[r * op.classes + c] = static_cast<T>(std::exp(z[c] - top) / sum);
    loss += std::log(sum) + top - z[labels[r]];
  }
  *loss_out = static_cast<T>(loss / static_cast<double>(op.rows));
}

template <typename T>
void softmax_cross_entropy_backward(const SoftmaxCrossEntropyOp& op, const BoundOperands& b) {
  const T* probabilities = b.in<T>("probabilities");
  const std::int32_t* labels = b.in<std::int32_t>("labels");
  T* diff = b.out<T>("diff_logits");
  const double loss_scale = op.scaled ? *b.in<float>("scale") : 1.0;
  const double scale = loss_scale / static_cast<double>(op.rows);
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < op.rows; ++r)
    for (Index c = 0; c < op.classes; ++c)
      diff[r * op.classes + c] = static_cast<T>(
          (probabilities[r * op.classes + c] - (c == labels[r] ? 1.0 : 0.0)) * scale);
}

template <typename T>
void adamw(const CpuKernels& kernels, Index count, const BoundOperands& b) {
  T* weights = b.out<T>("weights");
  const T* grads = b.in<T>("grads");
  T *m = b.out<T>("m"), *v = b.out<T>("v");
  const float* hyper = b.in<float>("hyper");
  const double lr = hyper[0], beta1 = hyper[1], beta2 = hyper[2], epsilon = hyper[3],
               weight_decay = hyper[4], step = hyper[5];
  const double correction1 = 1 - std::pow(beta1, step), correction2 = 1 - std::pow(beta2, step);
  if constexpr (std::is_same_v<T, float>) {
    return kernels.adamw_f32(count, weights, grads, m, v,
                             {hyper[0], hyper[1], hyper[2], hyper[3], hyper[4],
                              static_cast<float>(correction1), static_cast<float>(correction2)});
  }
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) {
    const double g = grads[i];
    double w = weights[i] * (1 - lr * weight_decay);
    m[i] = static_cast<T>(beta1 * m[i] + (1 - beta1) * g);
    v[i] = static_cast<T>(beta2 * v[i] + (1 - beta2) * g * g);
    w -= lr * (m[i] / correction1) / (std::sqrt(v[i] / correction2) + epsilon);
    weights[i] = static_cast<T>(w);
  }
}

// LAMB over a flat buffer of `tensors` parameter tensors (offsets in tensor_offsets).
template <typename T>
void lamb(const CpuKernels& kernels, Index tensors, const BoundOperands& b) {
  T* weights = b.out<T>("weights");
  const T* grads = b.in<T>("grads");
  T *m = b.out<T>("m"), *v = b.out<T>("v");
  const std::int32_t* offsets = b.in<std::int32_t>("tensor_offsets");
  const float* hyper = b.in<float>("hyper");
  const double lr = hyper[0], beta1 = hyper[1], beta2 = hyper[2], epsilon = hyper[3],
               weight_decay = hyper[4], step = hyper[5];
  const double correction1 = 1 - std::pow(beta1, step), correction2 = 1 - std::pow(beta2, step);
  if constexpr (std::is_same_v<T, float>) {
    return kernels.lamb_f32(tensors, offsets, weights, grads, m, v,
                            {hyper[0], hyper[1], hyper[2], hyper[3], hyper[4],
                             static_cast<float>(correction1), static_cast<float>(correction2)});
  }
#pragma omp parallel for schedule(dynamic)
  for (Index t = 0; t < tensors; ++t) {
    const Index begin = offsets[t], end = offsets[t + 1];
    double weight_norm = 0, update_norm = 0;
    for (Index i = begin; i < end; ++i) {
      const double g = grads[i];
      m[i] = static_cast<T>(beta1 * m[i] + (1 - beta1) * g);
      v[i] = static_cast<T>(beta2 * v[i] + (1 - beta2) * g * g);
      const double u = (m[i] / correction1) / (std::sqrt(v[i] / correction2) + epsilon) +
                       weight_decay * weights[i];
      weight_norm += static_cast<double>(weights[i]) * weights[i];
      update_norm += u * u;
    }
    const double ratio =
        weight_norm > 0 && update_norm > 0 ? std::sqrt(weight_norm / update_norm) : 1.0;
    for (Index i = begin; i < end; ++i) {
      const double u = (m[i] / correction1) / (std::sqrt(v[i] / correction2) + epsilon) +
                       weight_decay * weights[i];
      weights[i] = static_cast<T>(weights[i] - lr * ratio * u);
    }
  }
}

template <typename T>
void dropout(const CpuKernels& k, const DropoutOp& op, const BoundOperands& b) {
  const bool forward = op.pass == Pass::forward;
  const T* in = b.in<T>(forward ? "src" : "diff_dst");
  const std::int32_t step = *b.in<std::int32_t>("step");
  T* out = b.out<T>(forward ? "dst" : "diff_src");
  const std::uint64_t threshold = dropout_threshold(op.probability);
  const double scale = 1.0 / (1.0 - op.probability);
  if constexpr (std::is_same_v<T, float>) {
    k.dropout_f32(in, out, op.count, op.seed, step, threshold, static_cast<float>(scale));
  } else if constexpr (std::is_same_v<T, Bf16>) {
    k.dropout_bf16(&in->bits, &out->bits, op.count, op.seed, step, threshold,
                   static_cast<float>(scale));
  } else {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < op.count; ++i)
      out[i] = dropout_hash(op.seed, step, i) >= threshold ? static_cast<T>(in[i] * scale) : T(0);
  }
}

template <typename T>
void sgd_momentum(const CpuKernels& k, Index count, const BoundOperands& b) {
  T* weights = b.out<T>("weights");
  const T* grads = b.in<T>("grads");
  T* momentum = b.out<T>("momentum");
  const float* hyper = b.in<float>("hyper");
  if constexpr (std::is_same_v<T, float>)
    return k.sgd_momentum_f32(count, weights, grads, momentum, hyper[0], hyper[1], hyper[2]);
  const T learning_rate = hyper[0], mu = hyper[1], weight_decay = hyper[2];
#pragma omp parallel for simd schedule(static)
  for (Index i = 0; i < count; ++i)
    weights[i] =
        sgd_momentum_weight(learning_rate, mu, weight_decay, weights[i], grads[i], momentum[i]);
}

// Loss scaling: grads *= inverse_scale in place; the flag says whether any was not finite.
template <typename T>
void unscale_gradients(Index count, const BoundOperands& b) {
  T* grads = b.out<T>("grads");
  const T inverse_scale = *b.in<float>("inverse_scale");
  int nonfinite = 0;
#pragma omp parallel for simd schedule(static) reduction(| : nonfinite)
  for (Index i = 0; i < count; ++i) {
    grads[i] *= inverse_scale;
    nonfinite |= !std::isfinite(grads[i]);
  }
  *b.out<std::int32_t>("found_nonfinite") = nonfinite;
}

// f32 <-> bf16, round to nearest even: weights into the compute dtype, activations across a
// precision boundary.
Status plan_cast(const CpuKernels* k, const CastOp& op, std::unique_ptr<Plan>* out) {
  const bool to_bf16 = op.from == DType::f32 && op.to == DType::bf16;
  const bool to_f32 = op.from == DType::bf16 && op.to == DType::f32;
  if (!to_bf16 && !to_f32)
    return Status::Unimplemented(
        fmt::format("the shared CPU cast converts f32 <-> bf16, not {} -> {}", dtype_name(op.from),
                    dtype_name(op.to)));
  const Index count = op.count;
  KernelPlan::Kernel body;
  if (to_bf16)
    body = [k, count](const BoundOperands& b) {
      k->cast_f32_to_bf16(b.in<float>("src"), b.out<std::uint16_t>("dst"), count);
    };
  else
    body = [k, count](const BoundOperands& b) {
      k->cast_bf16_to_f32(b.in<std::uint16_t>("src"), b.out<float>("dst"), count);
    };
  *out =
      std::make_unique<KernelPlan>(cast_operands(op),
                                   fmt::format("shared CPU cast {} -> {} ({})", dtype_name(op.from),
                                               dtype_name(op.to), isa_name(k->isa)),
                                   std::move(body), is_reference_level(*k));
  return Status::Ok();
}

bool is_float_or_double(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64;
}

// Instantiates `Body<T>` for the op's dtype: f32 or f64, and bf16 (stored as Bf16, computed in
// float) for the ops no library here offers in bf16. `kernels`: the table the f32 / bf16 body
// runs (its level is named in the implementation), or null where those bodies are plain loops
// here; the f64 reference never uses it.
enum class Bf16Data { refused, accepted };
template <Bf16Data bf16 = Bf16Data::refused, typename Kernel>
Status make_plan(DType dtype, std::vector<OperandSpec> operands, std::string_view what,
                 const CpuKernels* kernels, Kernel&& kernel, std::unique_ptr<Plan>* out) {
  const bool bf16_ok = bf16 == Bf16Data::accepted && dtype == DType::bf16;
  if (!is_float_or_double(dtype) && !bf16_ok)
    return Status::Unimplemented(fmt::format("the shared CPU {} runs in f32 and f64{}, not {}",
                                             what, bf16 == Bf16Data::accepted ? " and bf16" : "",
                                             dtype_name(dtype)))
        .because(ReasonCode::dtype_unsupported);
  const bool tabled = kernels && dtype != DType::f64;
  const std::string implementation =
      fmt::format("shared CPU {} ({}, plain layout{}{})", what, dtype_name(dtype),
                  tabled ? ", " : "", tabled ? isa_name(kernels->isa) : "");
  KernelPlan::Kernel body;
  if (dtype == DType::f64)
    body = [kernel](const BoundOperands& b) { kernel(double{}, b); };
  else if (dtype == DType::f32)
    body = [kernel](const BoundOperands& b) { kernel(float{}, b); };
  else if constexpr (bf16 == Bf16Data::accepted)
    body = [kernel](const BoundOperands& b) { kernel(Bf16{}, b); };
  // The f64 loops are the reference itself; the portable float level is one where a vector
  // level exists.
  *out =
      std::make_unique<KernelPlan>(std::move(operands), implementation, std::move(body),
                                   dtype == DType::f64 || (tabled && is_reference_level(*kernels)));
  return Status::Ok();
}

// One plan() per op the shared CPU code has; the f64 GEMM, convolution and fully connected
// layer are the reference only, so their other dtypes answer as a missing op does.
class SharedPlanner {
 public:
  SharedPlanner(const CpuKernels* kernels, const OpDesc& desc, std::unique_ptr<Plan>* out)
      : k_(kernels), desc_(desc), out_(out) {}

  Status plan(const BatchNormOp& o) const {
    return make_plan(
        o.dtype, batch_norm_operands(o), "batch norm", k_,
        [k = k_, o]<typename T>(T, const BoundOperands& b) {
          if (o.inference)
            batch_norm_inference<T>(*k, o, b);
          else if (o.pass == Pass::forward)
            batch_norm_forward<T>(*k, o, b);
          else
            batch_norm_backward<T>(*k, o, b);
        },
        out_);
  }
  Status plan(const EltwiseOp& o) const {
    static constexpr const char* kNames[] = {"ReLU", "GELU (erf)", "tanh"};
    return make_plan(
        o.dtype, eltwise_operands(o), kNames[static_cast<int>(o.kind)],
        o.kind == EltwiseKind::relu ? k_ : nullptr,
        [k = k_, o]<typename T>(T, const BoundOperands& b) {
          const bool forward = o.pass == Pass::forward;
          switch (o.kind) {
            case EltwiseKind::relu:
              forward ? relu_forward<T>(*k, o.count, b) : relu_backward<T>(*k, o.count, b);
              break;
            case EltwiseKind::gelu:
              forward ? gelu_forward<T>(o.count, b) : gelu_backward<T>(o.count, b);
              break;
            case EltwiseKind::tanh:
              forward ? tanh_forward<T>(o.count, b) : tanh_backward<T>(o.count, b);
              break;
          }
        },
        out_);
  }
  Status plan(const LayerNormOp& o) const {
    return make_plan(
        o.dtype, layer_norm_operands(o), "layer norm", nullptr,
        [o]<typename T>(T, const BoundOperands& b) {
          o.pass == Pass::forward ? layer_norm_forward<T>(o, b) : layer_norm_backward<T>(o, b);
        },
        out_);
  }
  Status plan(const SoftmaxOp& o) const {
    if (o.rows_per_mask < 1 || o.rows % o.rows_per_mask != 0)
      return Status::InvalidArgument("softmax: rows must be a multiple of rows_per_mask");
    return make_plan<Bf16Data::accepted>(
        o.dtype, softmax_operands(o), o.masked ? "scaled masked softmax" : "scaled softmax",
        o.pass == Pass::forward ? k_ : nullptr,
        [k = k_, o]<typename T>(T, const BoundOperands& b) {
          o.pass == Pass::forward ? softmax_forward<T>(*k, o, b) : softmax_backward<T>(o, b);
        },
        out_);
  }
  Status plan(const EmbeddingOp& o) const {
    return make_plan<Bf16Data::accepted>(
        o.dtype, embedding_operands(o), o.pass == Pass::forward ? "row gather" : "row scatter-add",
        nullptr,
        [o]<typename T>(T, const BoundOperands& b) {
          if (o.pass == Pass::forward)
            embedding_forward<T>(o, b);
          else if (std::is_same_v<T, Bf16> && o.weight_table)
            embedding_backward<T, float>(o, b);
          else
            embedding_backward<T, T>(o, b);
        },
        out_);
  }
  Status plan(const BinaryOp& o) const {
    return make_plan(
        o.dtype, binary_operands(o), o.fuse_relu ? "add + ReLU" : "add", k_,
        [k = k_, o]<typename T>(T, const BoundOperands& b) { add<T>(*k, o, b); }, out_);
  }
  Status plan(const PoolOp& o) const {
    const bool max = o.kind == PoolKind::max;
    return make_plan(
        o.dtype, pool_operands(o), max ? "max pooling" : "global average pooling", k_,
        [k = k_, o, max]<typename T>(T, const BoundOperands& b) {
          if (o.pass == Pass::forward)
            max ? max_pool_forward<T>(*k, o, b) : average_pool_forward<T>(*k, o, b);
          else
            max ? max_pool_backward<T>(*k, o, b) : average_pool_backward<T>(*k, o, b);
        },
        out_);
  }
  Status plan(const SoftmaxCrossEntropyOp& o) const {
    return make_plan(
        o.dtype, softmax_cross_entropy_operands(o), "softmax cross-entropy",
        o.pass == Pass::forward ? k_ : nullptr,
        [k = k_, o]<typename T>(T, const BoundOperands& b) {
          o.pass == Pass::forward ? softmax_cross_entropy_forward<T>(*k, o, b)
                                  : softmax_cross_entropy_backward<T>(o, b);
        },
        out_);
  }
  Status plan(const CastOp& o) const { return plan_cast(k_, o, out_); }
  Status plan(const DropoutOp& o) const {
    if (!(o.probability >= 0 && o.probability < 1))
      return Status::InvalidArgument("dropout probability must be in [0, 1)");
    // Forward and backward are the same map: keep and scale, or zero.
    return make_plan<Bf16Data::accepted>(
        o.dtype, dropout_operands(o), "dropout (counter-based mask, not stored)", k_,
        [k = k_, o]<typename T>(T, const BoundOperands& b) { dropout<T>(*k, o, b); }, out_);
  }
  Status plan(const UnscaleGradientsOp& o) const {
    return make_plan(
        o.dtype, unscale_gradients_operands(o), "gradient unscale and finite check", nullptr,
        [o]<typename T>(T, const BoundOperands& b) { unscale_gradients<T>(o.count, b); }, out_);
  }
  Status plan(const OptimizerOp& o) const {
    if (o.kind == OptimizerKind::lamb && o.count > std::numeric_limits<std::int32_t>::max())
      return Status::Unimplemented("LAMB's tensor offsets are i32: at most 2^31 - 1 parameters");
    static constexpr const char* kNames[] = {"SGD with momentum", "AdamW", "LAMB"};
    return make_plan(
        o.dtype, optimizer_operands(o), kNames[static_cast<int>(o.kind)], k_,
        [k = k_, o]<typename T>(T, const BoundOperands& b) {
          switch (o.kind) {
            case OptimizerKind::sgd_momentum:
              return sgd_momentum<T>(*k, o.count, b);
            case OptimizerKind::adamw:
              return adamw<T>(*k, o.count, b);
            case OptimizerKind::lamb:
              return lamb<T>(*k, o.tensors, b);
          }
        },
        out_);
  }
  Status plan(const AttentionOp& o) const {
    if (o.dtype != DType::f64)
      return Status::Unimplemented(
          "no fused attention on the CPU: oneDNN 2.6 has no scaled dot-product attention "
          "primitive and OpenBLAS none (the shared CPU code holds the f64 reference only)");
    if (o.batch < 1 || o.heads < 1 || o.sequence < 1 || o.head_dim < 1)
      return Status::InvalidArgument("attention: batch, heads, sequence and head_dim must be >= 1");
    return make_plan(
        o.dtype, attention_operands(o), "fused attention", nullptr,
        [o]<typename T>(T, const BoundOperands& b) {
          if constexpr (std::is_same_v<T, double>)
            o.pass == Pass::forward ? attention_forward(o, b) : attention_backward(o, b);
        },
        out_);
  }
  Status plan(const GemmOp& o) const {
    if (o.a_type != DType::f64) return missing();
    if (o.b_type != DType::f64 || o.c_type != DType::f64)
      return Status::Unimplemented("the shared f64 GEMM takes f64 operands only");
    return make_plan(
        DType::f64, gemm_operands(o), "strided-batched GEMM", nullptr,
        [o]<typename T>(T, const BoundOperands& b) {
          if constexpr (std::is_same_v<T, double>) gemm(o, b);
        },
        out_);
  }
  Status plan(const ConvOp& o) const {
    if (o.dtype != DType::f64) return missing();
    if (o.epilogue != ConvEpilogue::none && o.direction != ConvDirection::forward)
      return Status::InvalidArgument("a convolution epilogue is for the forward direction");
    return make_plan(
        o.dtype, conv_operands(o), "direct convolution", nullptr,
        [o]<typename T>(T, const BoundOperands& b) {
          if constexpr (std::is_same_v<T, double>) {
            if (o.direction == ConvDirection::forward) conv_forward(o, b);
            if (o.direction == ConvDirection::backward_data) conv_backward_data(o, b);
            if (o.direction == ConvDirection::backward_weights) conv_backward_weights(o, b);
          }
        },
        out_);
  }
  Status plan(const FullyConnectedOp& o) const {
    if (o.dtype != DType::f64) return missing();
    return make_plan(
        o.dtype, fully_connected_operands(o), "fully connected", nullptr,
        [o]<typename T>(T, const BoundOperands& b) {
          if constexpr (std::is_same_v<T, double>) fully_connected(o, b);
        },
        out_);
  }
  // Stream, peak and transfer (each backend's own), and the reference-only ops in other dtypes.
  Status plan(const auto&) const { return missing(); }

 private:
  Status missing() const {
    return Status::Unimplemented(
        fmt::format("no shared CPU {} in this dtype (f64 reference only)", op_name(desc_)));
  }

  const CpuKernels* k_;  // the kernel level of the f32 and bf16 paths
  const OpDesc& desc_;
  std::unique_ptr<Plan>* out_;
};

}  // namespace

template <typename T>
void update_running_stats(const T* mean, const T* variance, std::int64_t channels,
                          std::int64_t reduced, float momentum, T* running_mean, T* running_var) {
  const double unbiased = reduced > 1 ? static_cast<double>(reduced) / (reduced - 1) : 1.0;
  for (Index c = 0; c < channels; ++c) {
    running_mean[c] = static_cast<T>((1.0 - momentum) * running_mean[c] + momentum * mean[c]);
    running_var[c] =
        static_cast<T>((1.0 - momentum) * running_var[c] + momentum * variance[c] * unbiased);
  }
}
template void update_running_stats<float>(const float*, const float*, std::int64_t, std::int64_t,
                                          float, float*, float*);
template void update_running_stats<double>(const double*, const double*, std::int64_t, std::int64_t,
                                           float, double*, double*);

Status plan_shared_training_op(const OpDesc& desc, std::unique_ptr<Plan>* out) {
  // The kernel level for the f32 and bf16 paths, chosen now (TRAINBENCH_MAX_ISA caps it).
  const CpuKernels* k = nullptr;
  if (Status status = kernels_from_environment(&k); !status.ok()) return status;
  const SharedPlanner planner(k, desc, out);
  return std::visit([&](const auto& op) { return planner.plan(op); }, desc);
}

}  // namespace tb::cpu
