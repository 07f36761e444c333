#include "backends/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "backends/product_reference.h"

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

// Both sums of one probe group at once, sum x_i y_i and sum x_i^2 z_i, in four independent
// partial sums each: the loop is bound by multiply-add latency otherwise.
std::pair<double, double> dots(const double* x, const double* y, const double* z, std::int64_t n) {
  double s[4] = {}, q[4] = {};
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int l = 0; l < 4; ++l) {
      s[l] += x[i + l] * y[i + l];
      q[l] += x[i + l] * x[i + l] * z[i + l];
    }
  for (; i < n; ++i) {
    s[0] += x[i] * y[i];
    q[0] += x[i] * x[i] * z[i];
  }
  return {(s[0] + s[1]) + (s[2] + s[3]), (q[0] + q[1]) + (q[2] + q[3])};
}

}  // namespace

double ErrorScale::of(double squares, double value) const {
  return accumulation * std::sqrt(squares) + output * std::fabs(value);
}

double ErrorScale::error(double got, const ReferenceValue& want) const {
  const double error = std::fabs(got - want.value) / std::max(of(want.squares, want.value), 1e-300);
  return std::isnan(error) ? INFINITY : error;
}

ReferenceValue gemm_reference(const GemmOp& op, const float* a, const float* b, const float* c0,
                              std::int64_t batch, std::int64_t i, std::int64_t j) {
  reference::ProductSum sum = reference::gemm_element(op, a, b, batch, 0, i, j);
  if (op.beta != 0) sum.add(op.beta * double{c0[(batch * op.m + i) * op.n + j]}, 1.0);
  return {sum.value, sum.squares};
}

double gemm_probe_error(const GemmOp& op, const float* a, const float* b, const float* c0,
                        const double* c, std::int64_t groups, const ErrorScale& scale,
                        std::uint64_t seed) {
  groups = std::clamp<std::int64_t>(groups, 1, op.n);
  std::mt19937_64 rng(seed);
  std::vector<double> x(op.n);
  std::vector<std::int64_t> group_of(op.n);
  for (std::int64_t j = 0; j < op.n; ++j) group_of[j] = j * groups / op.n;
  // (B x) and (B.B)(x.x) restricted to each group's columns, stored [group][kk].
  std::vector<double> bx(groups * op.k), bb(groups * op.k);
  double worst = 0;
  for (std::int64_t batch = 0; batch < op.batch; ++batch) {
    const GemmView view{op, a, b, batch};
    for (double& value : x) value = (rng() & 1) ? 1.0 : -1.0;
    std::fill(bx.begin(), bx.end(), 0.0);
    std::fill(bb.begin(), bb.end(), 0.0);
    for (std::int64_t kk = 0; kk < op.k; ++kk)
      for (std::int64_t j = 0; j < op.n; ++j) {
        const double b_kj = view.b_at(kk, j);
        bx[group_of[j] * op.k + kk] += b_kj * x[j];
        bb[group_of[j] * op.k + kk] += b_kj * b_kj;
      }
    const double alpha = op.alpha, beta = op.beta;
#pragma omp parallel for schedule(dynamic, 4) reduction(max : worst)
    for (std::int64_t i = 0; i < op.m; ++i) {
      std::vector<double> row(op.k);
      for (std::int64_t kk = 0; kk < op.k; ++kk) row[kk] = view.a_at(i, kk);
      // Per group: measured C x, the reference's beta C0 x, and the output rounding's scale.
      std::vector<double> measured(groups, 0.0), beta_term(groups, 0.0), beta_squares(groups, 0.0),
          output_sizes(groups, 0.0);
      const std::int64_t offset = (batch * op.m + i) * op.n;
      for (std::int64_t j = 0; j < op.n; ++j) {
        const std::int64_t g = group_of[j];
        const double c_ij = c[offset + j];
        measured[g] += c_ij * x[j];
        output_sizes[g] += std::fabs(c_ij);
        if (beta != 0) {
          beta_term[g] += beta * c0[offset + j] * x[j];
          beta_squares[g] += beta * beta * c0[offset + j] * c0[offset + j];
        }
      }
      for (std::int64_t g = 0; g < groups; ++g) {
        const auto [product, product_squares] =
            dots(row.data(), &bx[g * op.k], &bb[g * op.k], op.k);
        const double expected = alpha * product + beta_term[g];
        const double squares = alpha * alpha * product_squares + beta_squares[g];
        const double allowed =
            scale.accumulation * std::sqrt(squares) + scale.output * output_sizes[g];
        double error = std::fabs(measured[g] - expected) / std::max(allowed, 1e-300);
        if (std::isnan(error)) error = INFINITY;
        worst = std::max(worst, error);
      }
    }
  }
  return worst;
}

ConvAsGemm conv_as_gemm(const ConvOp& op) {
  const std::int64_t taps = op.kh * op.kw;
  switch (op.direction) {
    case ConvDirection::forward:
      return {op.mb, op.oc, op.oh() * op.ow(), op.ic * taps};
    case ConvDirection::backward_data:
      return {op.mb, op.ic, op.ih * op.iw, op.oc * taps};
    case ConvDirection::backward_weights:
      return {1, op.oc, op.ic * taps, op.mb * op.oh() * op.ow()};
  }
  return {};
}

namespace {

// Calls add(s, c, value) for every non-zero R[b](s, c) of a convolution seen as GEMMs (the
// implicit im2col matrix of image b; cpu::conv_as_gemm names the dimensions), in parallel over
// the outer loop: each of its iterations owns distinct s, so no two threads add to one entry.
template <typename Add>
void for_each_im2col_entry(const ConvOp& op, const float* in0, std::int64_t b, const Add& add) {
  const std::int64_t out_h = op.oh(), out_w = op.ow();
  switch (op.direction) {
    case ConvDirection::forward:  // R(s = (ic, kh, kw), c = (oh, ow)) = src
#pragma omp parallel for schedule(dynamic, 1)
      for (std::int64_t ic = 0; ic < op.ic; ++ic)
        for (std::int64_t kh = 0; kh < op.kh; ++kh)
          for (std::int64_t kw = 0; kw < op.kw; ++kw)
            for (std::int64_t oh = 0; oh < out_h; ++oh) {
              const std::int64_t ih = oh * op.sh - op.ph + kh;
              if (ih < 0 || ih >= op.ih) continue;
              for (std::int64_t ow = 0; ow < out_w; ++ow) {
                const std::int64_t iw = ow * op.sw - op.pw + kw;
                if (iw < 0 || iw >= op.iw) continue;
                add((ic * op.kh + kh) * op.kw + kw, oh * out_w + ow,
                    in0[((b * op.ic + ic) * op.ih + ih) * op.iw + iw]);
              }
            }
      break;
    case ConvDirection::backward_data:  // R(s = (oc, kh, kw), c = (ih, iw)) = diff_dst
#pragma omp parallel for schedule(dynamic, 1)
      for (std::int64_t oc = 0; oc < op.oc; ++oc)
        for (std::int64_t kh = 0; kh < op.kh; ++kh)
          for (std::int64_t kw = 0; kw < op.kw; ++kw)
            for (std::int64_t ih = 0; ih < op.ih; ++ih) {
              const std::int64_t h = ih + op.ph - kh;
              if (h < 0 || h % op.sh != 0 || h / op.sh >= out_h) continue;
              for (std::int64_t iw = 0; iw < op.iw; ++iw) {
                const std::int64_t w = iw + op.pw - kw;
                if (w < 0 || w % op.sw != 0 || w / op.sw >= out_w) continue;
                add((oc * op.kh + kh) * op.kw + kw, ih * op.iw + iw,
                    in0[((b * op.oc + oc) * out_h + h / op.sh) * out_w + w / op.sw]);
              }
            }
      break;
    case ConvDirection::backward_weights:  // R(s = (n, oh, ow), c = (ic, kh, kw)) = src
#pragma omp parallel for schedule(dynamic, 1)
      for (std::int64_t n = 0; n < op.mb; ++n)
        for (std::int64_t oh = 0; oh < out_h; ++oh)
          for (std::int64_t ow = 0; ow < out_w; ++ow)
            for (std::int64_t ic = 0; ic < op.ic; ++ic)
              for (std::int64_t kh = 0; kh < op.kh; ++kh) {
                const std::int64_t ih = oh * op.sh - op.ph + kh;
                if (ih < 0 || ih >= op.ih) continue;
                for (std::int64_t kw = 0; kw < op.kw; ++kw) {
                  const std::int64_t iw = ow * op.sw - op.pw + kw;
                  if (iw < 0 || iw >= op.iw) continue;
                  add((n * out_h + oh) * out_w + ow, (ic * op.kh + kh) * op.kw + kw,
                      in0[((n * op.ic + ic) * op.ih + ih) * op.iw + iw]);
                }
              }
      break;
  }
}

}  // namespace

double conv_probe_error(const ConvOp& op, const float* in0, const float* in1, const float* bias,
                        const double* out, std::int64_t groups, const ErrorScale& scale,
                        std::uint64_t seed) {
  const ConvAsGemm shape = conv_as_gemm(op);
  groups = std::clamp<std::int64_t>(groups, 1, shape.columns);
  const std::int64_t out_h = op.oh(), out_w = op.ow(), plane = out_h * out_w, taps = op.kh * op.kw;
  std::mt19937_64 rng(seed);
  std::vector<double> x(shape.columns);
  std::vector<std::int64_t> group_of(shape.columns), group_size(groups, 0);
  for (std::int64_t c = 0; c < shape.columns; ++c)
    ++group_size[group_of[c] = c * groups / shape.columns];
  // R x and (R.R)(x.x) restricted to each group's columns, stored [group][s].
  std::vector<double> rx(groups * shape.inner), rr(groups * shape.inner);
  double worst = 0;
  for (std::int64_t b = 0; b < shape.batches; ++b) {
    for (double& value : x) value = (rng() & 1) ? 1.0 : -1.0;
    std::fill(rx.begin(), rx.end(), 0.0);
    std::fill(rr.begin(), rr.end(), 0.0);
    const auto add = [&](std::int64_t s, std::int64_t c, double r) {
      rx[group_of[c] * shape.inner + s] += r * x[c];
      rr[group_of[c] * shape.inner + s] += r * r;
    };
    for_each_im2col_entry(op, in0, b, add);
#pragma omp parallel for schedule(dynamic, 1) reduction(max : worst)
    for (std::int64_t r = 0; r < shape.rows; ++r) {
      std::vector<double> row(shape.inner);  // L[b](r, :)
      for (std::int64_t s = 0; s < shape.inner; ++s)
        row[s] = op.direction == ConvDirection::forward ? in1[r * shape.inner + s]
                 : op.direction == ConvDirection::backward_data
                     ? in1[((s / taps) * op.ic + r) * taps + s % taps]  // weights(oc, ic, kh, kw)
                     : in1[((s / plane) * op.oc + r) * plane + s % plane];  // diff_dst(n, oc, p)
      std::vector<double> measured(groups, 0.0), output_sizes(groups, 0.0);
      const double* out_row = out + (b * shape.rows + r) * shape.columns;
      for (std::int64_t c = 0; c < shape.columns; ++c) {
        measured[group_of[c]] += out_row[c] * x[c];
        output_sizes[group_of[c]] += std::fabs(out_row[c]);
      }
      std::vector<double> bias_term(groups, 0.0);
      if (bias)
        for (std::int64_t c = 0; c < shape.columns; ++c) bias_term[group_of[c]] += bias[r] * x[c];
      for (std::int64_t g = 0; g < groups; ++g) {
        const auto [product, product_squares] =
            dots(row.data(), &rx[g * shape.inner], &rr[g * shape.inner], shape.inner);
        const double bias_squares = bias ? double{bias[r]} * bias[r] * group_size[g] : 0.0;
        const double allowed = scale.accumulation * std::sqrt(product_squares + bias_squares) +
                               scale.output * output_sizes[g];
        double error = std::fabs(measured[g] - product - bias_term[g]) / std::max(allowed, 1e-300);
        if (std::isnan(error)) error = INFINITY;
        worst = std::max(worst, error);
      }
    }
  }
  return worst;
}

}  // namespace tb::cpu
