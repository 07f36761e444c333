// The scaled masked softmax attention uses and the softmax cross-entropy loss.
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
#include "backends/cpu_kernels/vector_kernels.h"
#include "backends/low_precision.h"
#include "backends/operands.h"

namespace tb::cpu {
namespace {

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

}  // namespace

Status plan_shared(const CpuKernels* k, const SoftmaxOp& o, std::unique_ptr<Plan>* out) {
  if (o.rows_per_mask < 1 || o.rows % o.rows_per_mask != 0)
    return Status::InvalidArgument("softmax: rows must be a multiple of rows_per_mask");
  return make_plan<Bf16Data::accepted>(
      o.dtype, softmax_operands(o), o.masked ? "scaled masked softmax" : "scaled softmax",
      o.pass == Pass::forward ? k : nullptr,
      [k, o]<typename T>(T, const BoundOperands& b) {
        o.pass == Pass::forward ? softmax_forward<T>(*k, o, b) : softmax_backward<T>(o, b);
      },
      out);
}

Status plan_shared(const CpuKernels* k, const SoftmaxCrossEntropyOp& o,
                   std::unique_ptr<Plan>* out) {
  return make_plan(
      o.dtype, softmax_cross_entropy_operands(o), "softmax cross-entropy",
      o.pass == Pass::forward ? k : nullptr,
      [k, o]<typename T>(T, const BoundOperands& b) {
        o.pass == Pass::forward ? softmax_cross_entropy_forward<T>(*k, o, b)
                                : softmax_cross_entropy_backward<T>(o, b);
      },
      out);
}

}  // namespace tb::cpu
