// RMSNorm's CPU kernels (backends/ops/rms_norm.h), in f32, bf16 (computed in float) and f64 (the
// reference): rows on every thread; diff_gamma's column sums by blocks of columns, each summed
// over the rows in order, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "backends/cpu_kernels/kernel_plan.h"
#include "backends/cpu_kernels/training_families.h"
#include "backends/operands.h"

namespace tb::cpu {
namespace {

template <typename T>
void rms_norm_forward(const RmsNormOp& op, const BoundOperands& b) {
  using P = StatisticsType<T>;  // gamma, r and diff_gamma
  const T* src = b.in<T>("src");
  const P* gamma = b.in<P>("gamma");
  T* dst = b.out<T>("dst");
  P* inverse_rms = b.out<P>("inverse_rms");
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < op.rows; ++r) {
    const T* x = src + r * op.cols;
    double squares = 0;
    for (Index c = 0; c < op.cols; ++c) squares += static_cast<double>(x[c]) * x[c];
    const double inverse = 1.0 / std::sqrt(squares / static_cast<double>(op.cols) + op.epsilon);
    for (Index c = 0; c < op.cols; ++c)
      dst[r * op.cols + c] = static_cast<T>(static_cast<double>(x[c]) * inverse * gamma[c]);
    inverse_rms[r] = static_cast<P>(inverse);
  }
}

template <typename T>
void rms_norm_backward(const RmsNormOp& op, const BoundOperands& b) {
  using P = StatisticsType<T>;  // gamma, r and diff_gamma
  const T *src = b.in<T>("src"), *diff_dst = b.in<T>("diff_dst");
  const P *gamma = b.in<P>("gamma"), *inverse_rms = b.in<P>("inverse_rms");
  T* diff_src = b.out<T>("diff_src");
  P* diff_gamma = b.out<P>("diff_gamma");
  const Index cols = op.cols;
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < op.rows; ++r) {
    const T *x = src + r * cols, *dy = diff_dst + r * cols;
    const double inverse = inverse_rms[r];
    double projection = 0;  // sum of g * xhat, g = dy * gamma
    for (Index c = 0; c < cols; ++c)
      projection += static_cast<double>(dy[c]) * gamma[c] * x[c] * inverse;
    const double mean_projection = projection / static_cast<double>(cols);
    for (Index c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dy[c]) * gamma[c], xhat = x[c] * inverse;
      diff_src[r * cols + c] = static_cast<T>(inverse * (g - xhat * mean_projection));
    }
  }
  constexpr Index kBlock = 64;
  const Index blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (Index block = 0; block < blocks; ++block) {
    const Index first = block * kBlock, last = std::min(cols, first + kBlock);
    double sums[kBlock] = {};
    for (Index r = 0; r < op.rows; ++r) {
      const double inverse = inverse_rms[r];
      for (Index c = first; c < last; ++c)
        sums[c - first] +=
            static_cast<double>(diff_dst[r * cols + c]) * src[r * cols + c] * inverse;
    }
    for (Index c = first; c < last; ++c) diff_gamma[c] = static_cast<P>(sums[c - first]);
  }
}

}  // namespace

Status plan_shared(const CpuKernels* /*k: plain loops*/, const RmsNormOp& o,
                   std::unique_ptr<Plan>* out) {
  TB_RETURN_IF_ERROR(check_rms_norm(o));
  return make_plan<Bf16Data::accepted>(
      o.dtype, rms_norm_operands(o), "RMSNorm", nullptr,
      [o]<typename T>(T, const BoundOperands& b) {
        o.pass == Pass::forward ? rms_norm_forward<T>(o, b) : rms_norm_backward<T>(o, b);
      },
      out);
}

}  // namespace tb::cpu
