// The f64 reference of one output element of each product op: GEMM, the fully connected layer
// and convolution in its three directions. Written once, here: workload validation
// (backends/reference/reference.*), the sampled check of a network's ops
// (models/sampled_reference.*) and the whole-op f64 plans of the shared CPU code
// (backends/cpu_kernels/training_ops.cpp) all call it. Inputs are plain (row-major, NCHW, OIHW)
// arrays of float or double, or any value that reads like one (`values[i]`, `values + offset`:
// the sampled check's gathered elements); every product is taken in double. Each sum is over the
// terms in one fixed order, so an element is the same bits whichever caller asks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/ops.h"

namespace tb::reference {

using Index = std::int64_t;

// A sum of products and what an error scale is made of: the sum of the terms' squares (their
// L2 norm, squared; validation's scale) and of their absolute values (the op check's).
struct ProductSum {
  double value = 0, squares = 0, magnitude = 0;
  void add(double x, double y) {
    const double term = x * y;
    value += term;
    squares += term * term;
    magnitude += std::fabs(term);
  }
  void scale(double factor) {  // alpha: every term times it
    value *= factor;
    squares *= factor * factor;
    magnitude *= std::fabs(factor);
  }
};

// A layer's bias, one term after the products, then its ReLU where it has one.
inline void add_bias(ProductSum& sum, double bias, bool relu) {
  sum.add(bias, 1.0);
  if (relu) sum.value = std::max(sum.value, 0.0);
}

// Element (batch, head, i, j) of alpha op(A) op(B), the operands stored as gemm_layout() says
// (transposes, heads, interleaving). beta C0 is the caller's: add it as one more term.
template <typename Values>
ProductSum gemm_element(const GemmOp& op, Values a, Values b, Index batch, Index head, Index i,
                        Index j) {
  const GemmOperandLayout la = gemm_layout(op, GemmOperand::a),
                          lb = gemm_layout(op, GemmOperand::b);
  const Values row = a + batch * la.batch + head * la.head + i * la.row;
  const Values column = b + batch * lb.batch + head * lb.head + j * lb.col;
  ProductSum sum;
  for (Index p = 0; p < op.k; ++p)
    sum.add(static_cast<double>(row[p * la.col]), static_cast<double>(column[p * lb.row]));
  sum.scale(op.alpha);
  return sum;
}

// Convolution output (n, oc, y, x) before any bias or ReLU epilogue.
template <typename Values>
ProductSum conv_forward_element(const ConvOp& op, Values src, Values weights, Index n, Index oc,
                                Index y, Index x) {
  ProductSum sum;
  for (Index ic = 0; ic < op.ic; ++ic)
    for (Index ky = 0; ky < op.kh; ++ky) {
      const Index iy = y * op.sh - op.ph + ky;
      if (iy < 0 || iy >= op.ih) continue;
      for (Index kx = 0; kx < op.kw; ++kx) {
        const Index ix = x * op.sw - op.pw + kx;
        if (ix < 0 || ix >= op.iw) continue;
        sum.add(static_cast<double>(src[((n * op.ic + ic) * op.ih + iy) * op.iw + ix]),
                static_cast<double>(weights[((oc * op.ic + ic) * op.kh + ky) * op.kw + kx]));
      }
    }
  return sum;
}

// Data gradient (n, ic, iy, ix): a gather over the outputs whose windows cover the input.
template <typename Values>
ProductSum conv_backward_data_element(const ConvOp& op, Values diff_dst, Values weights, Index n,
                                      Index ic, Index iy, Index ix) {
  const Index oh = op.oh(), ow = op.ow();
  ProductSum sum;
  for (Index oc = 0; oc < op.oc; ++oc)
    for (Index ky = 0; ky < op.kh; ++ky) {
      const Index ty = iy + op.ph - ky;  // = y * sh
      if (ty < 0 || ty % op.sh != 0 || ty / op.sh >= oh) continue;
      for (Index kx = 0; kx < op.kw; ++kx) {
        const Index tx = ix + op.pw - kx;
        if (tx < 0 || tx % op.sw != 0 || tx / op.sw >= ow) continue;
        sum.add(
            static_cast<double>(diff_dst[((n * op.oc + oc) * oh + ty / op.sh) * ow + tx / op.sw]),
            static_cast<double>(weights[((oc * op.ic + ic) * op.kh + ky) * op.kw + kx]));
      }
    }
  return sum;
}

// Weight gradient (oc, ic, ky, kx): a sum over the batch and the output positions.
template <typename Values>
ProductSum conv_backward_weights_element(const ConvOp& op, Values src, Values diff_dst, Index oc,
                                         Index ic, Index ky, Index kx) {
  const Index oh = op.oh(), ow = op.ow();
  ProductSum sum;
  for (Index n = 0; n < op.mb; ++n)
    for (Index y = 0; y < oh; ++y) {
      const Index iy = y * op.sh - op.ph + ky;
      if (iy < 0 || iy >= op.ih) continue;
      for (Index x = 0; x < ow; ++x) {
        const Index ix = x * op.sw - op.pw + kx;
        if (ix < 0 || ix >= op.iw) continue;
        sum.add(static_cast<double>(src[((n * op.ic + ic) * op.ih + iy) * op.iw + ix]),
                static_cast<double>(diff_dst[((n * op.oc + oc) * oh + y) * ow + x]));
      }
    }
  return sum;
}

// The fully connected layer's directions, as the GEMMs they are (fully_connected_gemm):
// forward (n, o) from src and weights, before its bias (the caller's, as a convolution's);
// backward-data (n, i) from diff_dst and weights; backward-weights (o, i) from diff_dst and src.
template <typename Values>
ProductSum fully_connected_element(const FullyConnectedOp& op, Values first, Values second,
                                   Index row, Index column) {
  return gemm_element(fully_connected_gemm(op), first, second, 0, 0, row, column);
}
// The bias gradient (o): the column sum of diff_dst.
template <typename Values>
ProductSum fully_connected_bias_gradient_element(const FullyConnectedOp& op, Values diff_dst,
                                                 Index o) {
  ProductSum sum;
  for (Index n = 0; n < op.mb; ++n) sum.add(static_cast<double>(diff_dst[n * op.out + o]), 1.0);
  return sum;
}

}  // namespace tb::reference
