// Max and global-average pooling, forward and backward.
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

}  // namespace

Status plan_shared(const CpuKernels* k, const PoolOp& o, std::unique_ptr<Plan>* out) {
  const bool max = o.kind == PoolKind::max;
  return make_plan(
      o.dtype, pool_operands(o), max ? "max pooling" : "global average pooling", k,
      [k, o, max]<typename T>(T, const BoundOperands& b) {
        if (o.pass == Pass::forward)
          max ? max_pool_forward<T>(*k, o, b) : average_pool_forward<T>(*k, o, b);
        else
          max ? max_pool_backward<T>(*k, o, b) : average_pool_backward<T>(*k, o, b);
      },
      out);
}

}  // namespace tb::cpu
