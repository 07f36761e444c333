// The optimizers' per-element arithmetic in float, shared by the CPU's portable loops and the
// CUDA kernels, so both backends update a parameter with the same operations in the same order.
#pragma once

#include <cmath>

#include "backends/host_device.h"

namespace tb {

// PyTorch's AdamW (and LAMB's moments), with bias corrections c1 = 1 - beta1^t,
// c2 = 1 - beta2^t.
struct AdamCoefficients {
  float learning_rate, beta1, beta2, epsilon, weight_decay, correction1, correction2;
};

// What the element loops use, derived once per step: the divisions and the square root of
// the corrections are hoisted out of the loop.
struct AdamFactors {
  float beta1, beta2, epsilon, weight_decay;
  float decay;            // 1 - lr * weight_decay (AdamW's decoupled decay)
  float step_size;        // lr / c1
  float inverse_c1;       // 1 / c1
  float inverse_root_c2;  // 1 / sqrt(c2)
};
TB_ALWAYS_INLINE AdamFactors adam_factors(const AdamCoefficients& k) {
  return {k.beta1,
          k.beta2,
          k.epsilon,
          k.weight_decay,
          1.0f - k.learning_rate * k.weight_decay,
          k.learning_rate / k.correction1,
          1.0f / k.correction1,
          1.0f / sqrtf(k.correction2)};
}

// m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2.
TB_HOST_DEVICE TB_ALWAYS_INLINE void adam_moments(const AdamFactors& f, float g, float& m,
                                                  float& v) {
  m = f.beta1 * m + (1.0f - f.beta1) * g;
  v = f.beta2 * v + (1.0f - f.beta2) * g * g;
}

// AdamW's new weight from the updated moments.
TB_HOST_DEVICE TB_ALWAYS_INLINE float adamw_weight(const AdamFactors& f, float w, float m,
                                                   float v) {
  return w * f.decay - f.step_size * m / (sqrtf(v) * f.inverse_root_c2 + f.epsilon);
}

// LAMB's update direction u = m_hat / (sqrt(v_hat) + eps) + weight_decay * w.
TB_HOST_DEVICE TB_ALWAYS_INLINE float lamb_update(const AdamFactors& f, float w, float m, float v) {
  return m * f.inverse_c1 / (sqrtf(v) * f.inverse_root_c2 + f.epsilon) + f.weight_decay * w;
}

// LAMB's step for a tensor: the learning rate times the trust ratio |w| / |u| (1 where either
// norm is 0), from the squared norms.
TB_HOST_DEVICE TB_ALWAYS_INLINE float lamb_step(float learning_rate, double weight_norm,
                                                double update_norm) {
  return learning_rate * static_cast<float>(weight_norm > 0 && update_norm > 0
                                                ? sqrt(weight_norm / update_norm)
                                                : 1.0);
}

// PyTorch's SGD with momentum: g = grad + weight_decay * w; v = mu v + g; w -= lr v.
template <typename T>
TB_HOST_DEVICE TB_ALWAYS_INLINE T sgd_momentum_weight(T learning_rate, T mu, T weight_decay, T w,
                                                      T grad, T& momentum) {
  momentum = mu * momentum + (grad + weight_decay * w);
  return w - learning_rate * momentum;
}

}  // namespace tb
