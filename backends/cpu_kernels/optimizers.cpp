// The SGD with momentum, AdamW and LAMB updates over a flat parameter buffer.
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
#include "backends/optimizer_math.h"

namespace tb::cpu {
namespace {

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

}  // namespace

Status plan_shared(const CpuKernels* k, const OptimizerOp& o, std::unique_ptr<Plan>* out) {
  if (o.kind == OptimizerKind::lamb && o.count > std::numeric_limits<std::int32_t>::max())
    return Status::Unimplemented("LAMB's tensor offsets are i32: at most 2^31 - 1 parameters");
  static constexpr const char* kNames[] = {"SGD with momentum", "AdamW", "LAMB"};
  return make_plan(
      o.dtype, optimizer_operands(o), kNames[static_cast<int>(o.kind)], k,
      [k, o]<typename T>(T, const BoundOperands& b) {
        switch (o.kind) {
          case OptimizerKind::sgd_momentum:
            return sgd_momentum<T>(*k, o.count, b);
          case OptimizerKind::adamw:
            return adamw<T>(*k, o.count, b);
          case OptimizerKind::lamb:
            return lamb<T>(*k, o.tensors, b);
        }
      },
      out);
}

}  // namespace tb::cpu
