// Batch norm (per channel over N, H, W, optionally followed by ReLU) and layer norm (per row),
// forward and backward.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu_kernels/kernel_plan.h"
#include "backends/cpu_kernels/training_families.h"
#include "backends/cpu_kernels/training_ops.h"
#include "backends/cpu_kernels/vector_kernels.h"
#include "backends/low_precision.h"
#include "backends/operands.h"

namespace tb::cpu {
namespace {

// The f32 (and bf16) paths run the plan's kernel table (vector_kernels.h); the templates' plain
// loops are the f64 reference.
BatchNormShape batch_norm_shape(const BatchNormOp& op) {
  return {op.mb, op.channels, op.h * op.w, op.epsilon};
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

// --- layer norm ---

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

}  // namespace

Status plan_shared(const CpuKernels* k, const BatchNormOp& o, std::unique_ptr<Plan>* out) {
  return make_plan(
      o.dtype, batch_norm_operands(o), "batch norm", k,
      [k, o]<typename T>(T, const BoundOperands& b) {
        if (o.inference)
          batch_norm_inference<T>(*k, o, b);
        else if (o.pass == Pass::forward)
          batch_norm_forward<T>(*k, o, b);
        else
          batch_norm_backward<T>(*k, o, b);
      },
      out);
}

Status plan_shared(const CpuKernels* /*k: plain loops*/, const LayerNormOp& o,
                   std::unique_ptr<Plan>* out) {
  return make_plan(
      o.dtype, layer_norm_operands(o), "layer norm", nullptr,
      [o]<typename T>(T, const BoundOperands& b) {
        o.pass == Pass::forward ? layer_norm_forward<T>(o, b) : layer_norm_backward<T>(o, b);
      },
      out);
}

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

}  // namespace tb::cpu
