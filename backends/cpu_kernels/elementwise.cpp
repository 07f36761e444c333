// Element-wise ops: ReLU, GELU (erf), tanh, add, dropout, f32 <-> bf16 casts and loss
// scaling's unscale-and-check.
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
#include "backends/seeded.h"

namespace tb::cpu {
namespace {

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

}  // namespace

Status plan_shared(const CpuKernels* k, const EltwiseOp& o, std::unique_ptr<Plan>* out) {
  static constexpr const char* kNames[] = {"ReLU", "GELU (erf)", "tanh"};
  return make_plan(
      o.dtype, eltwise_operands(o), kNames[static_cast<int>(o.kind)],
      o.kind == EltwiseKind::relu ? k : nullptr,
      [k, o]<typename T>(T, const BoundOperands& b) {
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
      out);
}

Status plan_shared(const CpuKernels* k, const BinaryOp& o, std::unique_ptr<Plan>* out) {
  return make_plan(
      o.dtype, binary_operands(o), o.fuse_relu ? "add + ReLU" : "add", k,
      [k, o]<typename T>(T, const BoundOperands& b) { add<T>(*k, o, b); }, out);
}

Status plan_shared(const CpuKernels* k, const DropoutOp& o, std::unique_ptr<Plan>* out) {
  if (!(o.probability >= 0 && o.probability < 1))
    return Status::InvalidArgument("dropout probability must be in [0, 1)");
  // Forward and backward are the same map: keep and scale, or zero.
  return make_plan<Bf16Data::accepted>(
      o.dtype, dropout_operands(o), "dropout (counter-based mask, not stored)", k,
      [k, o]<typename T>(T, const BoundOperands& b) { dropout<T>(*k, o, b); }, out);
}

Status plan_shared(const CpuKernels* /*k: plain loops*/, const UnscaleGradientsOp& o,
                   std::unique_ptr<Plan>* out) {
  return make_plan(
      o.dtype, unscale_gradients_operands(o), "gradient unscale and finite check", nullptr,
      [o]<typename T>(T, const BoundOperands& b) { unscale_gradients<T>(o.count, b); }, out);
}

// f32 <-> bf16, round to nearest even: weights into the compute dtype, activations across a
// precision boundary.
Status plan_shared(const CpuKernels* k, const CastOp& op, std::unique_ptr<Plan>* out) {
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

}  // namespace tb::cpu
