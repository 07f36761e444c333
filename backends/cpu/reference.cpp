#include "backends/cpu/reference.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace tb::cpu {
namespace {

// Accessors for op(A)(i, kk) and op(B)(kk, j) of one batch, honouring the transposes.
struct GemmView {
  const GemmOp& op;
  const float* a;
  const float* b;
  std::int64_t batch;
  double a_at(std::int64_t i, std::int64_t kk) const {
    const float* base = a + batch * op.m * op.k;
    return op.trans_a ? base[kk * op.m + i] : base[i * op.k + kk];
  }
  double b_at(std::int64_t kk, std::int64_t j) const {
    const float* base = b + batch * op.k * op.n;
    return op.trans_b ? base[j * op.k + kk] : base[kk * op.n + j];
  }
};

void accumulate(ReferenceValue& ref, double term) {
  ref.value += term;
  ref.magnitude += std::fabs(term);
}

}  // namespace

ReferenceValue gemm_reference(const GemmOp& op, const float* a, const float* b, const float* c0,
                              std::int64_t batch, std::int64_t i, std::int64_t j) {
  const GemmView view{op, a, b, batch};
  ReferenceValue product;
  for (std::int64_t kk = 0; kk < op.k; ++kk)
    accumulate(product, view.a_at(i, kk) * view.b_at(kk, j));
  ReferenceValue result{op.alpha * product.value, std::fabs(op.alpha) * product.magnitude};
  if (op.beta != 0) accumulate(result, op.beta * double{c0[(batch * op.m + i) * op.n + j]});
  return result;
}

double gemm_freivalds_error(const GemmOp& op, const float* a, const float* b, const float* c0,
                            const float* c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> x(op.n), bx(op.k), abs_bx(op.k);
  double worst = 0;
  for (std::int64_t batch = 0; batch < op.batch; ++batch) {
    const GemmView view{op, a, b, batch};
    for (double& value : x) value = uniform(rng);
    for (std::int64_t kk = 0; kk < op.k; ++kk) {
      double sum = 0, abs_sum = 0;
      for (std::int64_t j = 0; j < op.n; ++j) {
        const double term = view.b_at(kk, j) * x[j];
        sum += term;
        abs_sum += std::fabs(term);
      }
      bx[kk] = sum;
      abs_bx[kk] = abs_sum;
    }
    for (std::int64_t i = 0; i < op.m; ++i) {
      double expected = 0, magnitude = 0, measured = 0;
      for (std::int64_t kk = 0; kk < op.k; ++kk) {
        const double a_ik = view.a_at(i, kk);
        expected += a_ik * bx[kk];
        magnitude += std::fabs(a_ik) * abs_bx[kk];
      }
      expected *= op.alpha;
      magnitude *= std::fabs(op.alpha);
      const std::int64_t row = (batch * op.m + i) * op.n;
      for (std::int64_t j = 0; j < op.n; ++j) {
        measured += double{c[row + j]} * x[j];
        if (op.beta != 0) {
          expected += op.beta * double{c0[row + j]} * x[j];
          magnitude += std::fabs(op.beta * double{c0[row + j]} * x[j]);
        }
      }
      const double error = std::fabs(measured - expected) / std::max(magnitude, 1e-300);
      if (!(error <= worst)) worst = std::isnan(error) ? INFINITY : error;
    }
  }
  return worst;
}

ReferenceValue conv_forward_reference(const ConvOp& op, const float* src, const float* weights,
                                      std::int64_t n, std::int64_t oc, std::int64_t oh,
                                      std::int64_t ow) {
  ReferenceValue ref;
  for (std::int64_t ic = 0; ic < op.ic; ++ic)
    for (std::int64_t kh = 0; kh < op.kh; ++kh) {
      const std::int64_t ih = oh * op.sh - op.ph + kh;
      if (ih < 0 || ih >= op.ih) continue;
      for (std::int64_t kw = 0; kw < op.kw; ++kw) {
        const std::int64_t iw = ow * op.sw - op.pw + kw;
        if (iw < 0 || iw >= op.iw) continue;
        accumulate(ref, double{src[((n * op.ic + ic) * op.ih + ih) * op.iw + iw]} *
                            weights[((oc * op.ic + ic) * op.kh + kh) * op.kw + kw]);
      }
    }
  return ref;
}

ReferenceValue conv_backward_data_reference(const ConvOp& op, const float* diff_dst,
                                            const float* weights, std::int64_t n, std::int64_t ic,
                                            std::int64_t ih, std::int64_t iw) {
  const std::int64_t out_h = op.oh(), out_w = op.ow();
  ReferenceValue ref;
  for (std::int64_t oc = 0; oc < op.oc; ++oc)
    for (std::int64_t kh = 0; kh < op.kh; ++kh) {
      const std::int64_t h = ih + op.ph - kh;  // = oh * sh
      if (h < 0 || h % op.sh != 0 || h / op.sh >= out_h) continue;
      for (std::int64_t kw = 0; kw < op.kw; ++kw) {
        const std::int64_t w = iw + op.pw - kw;
        if (w < 0 || w % op.sw != 0 || w / op.sw >= out_w) continue;
        accumulate(ref,
                   double{diff_dst[((n * op.oc + oc) * out_h + h / op.sh) * out_w + w / op.sw]} *
                       weights[((oc * op.ic + ic) * op.kh + kh) * op.kw + kw]);
      }
    }
  return ref;
}

ReferenceValue conv_backward_weights_reference(const ConvOp& op, const float* src,
                                               const float* diff_dst, std::int64_t oc,
                                               std::int64_t ic, std::int64_t kh, std::int64_t kw) {
  const std::int64_t out_h = op.oh(), out_w = op.ow();
  ReferenceValue ref;
  for (std::int64_t n = 0; n < op.mb; ++n)
    for (std::int64_t oh = 0; oh < out_h; ++oh) {
      const std::int64_t ih = oh * op.sh - op.ph + kh;
      if (ih < 0 || ih >= op.ih) continue;
      for (std::int64_t ow = 0; ow < out_w; ++ow) {
        const std::int64_t iw = ow * op.sw - op.pw + kw;
        if (iw < 0 || iw >= op.iw) continue;
        accumulate(ref, double{src[((n * op.ic + ic) * op.ih + ih) * op.iw + iw]} *
                            diff_dst[((n * op.oc + oc) * out_h + oh) * out_w + ow]);
      }
    }
  return ref;
}

}  // namespace tb::cpu
