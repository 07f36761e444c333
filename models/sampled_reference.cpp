#include "models/sampled_reference.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "backends/seeded.h"

namespace tb {
namespace {

using Index = std::int64_t;

// A sum of products in f64, and the same sum of their absolute values.
struct Dot {
  double value = 0, magnitude = 0;
  void add(double x, double y) {
    value += x * y;
    magnitude += std::fabs(x * y);
  }
};

Index sample_index(std::uint64_t seed, Index sample, Index elements) {
  return static_cast<Index>(mix64(seed + static_cast<std::uint64_t>(sample) * kGoldenGamma) %
                            static_cast<std::uint64_t>(elements));
}

// Element `flat` of a row-major array of `dims`, split into its coordinates.
template <std::size_t N>
std::array<Index, N> coordinates(Index flat, const std::array<Index, N>& dims) {
  std::array<Index, N> at{};
  for (std::size_t d = N; d-- > 0;) {
    at[d] = flat % dims[d];
    flat /= dims[d];
  }
  return at;
}

Dot conv_at(const ConvOp& op, std::span<const std::vector<double>> in, Index flat) {
  const Index oh = op.oh(), ow = op.ow();
  Dot dot;
  auto src_at = [&](Index n, Index c, Index y, Index x) {
    return ((n * op.ic + c) * op.ih + y) * op.iw + x;
  };
  auto dst_at = [&](Index n, Index k, Index y, Index x) {
    return ((n * op.oc + k) * oh + y) * ow + x;
  };
  auto weight_at = [&](Index k, Index c, Index y, Index x) {
    return ((k * op.ic + c) * op.kh + y) * op.kw + x;
  };
  switch (op.direction) {
    case ConvDirection::forward: {
      const auto [n, k, y, x] = coordinates<4>(flat, {op.mb, op.oc, oh, ow});
      for (Index c = 0; c < op.ic; ++c)
        for (Index ky = 0; ky < op.kh; ++ky)
          for (Index kx = 0; kx < op.kw; ++kx) {
            const Index iy = y * op.sh - op.ph + ky, ix = x * op.sw - op.pw + kx;
            if (iy < 0 || iy >= op.ih || ix < 0 || ix >= op.iw) continue;
            dot.add(in[0][src_at(n, c, iy, ix)], in[1][weight_at(k, c, ky, kx)]);
          }
      if (op.epilogue != ConvEpilogue::none) dot.add(in[2][k], 1.0);
      if (op.epilogue == ConvEpilogue::bias_relu) dot.value = std::max(dot.value, 0.0);
      return dot;
    }
    case ConvDirection::backward_data: {
      const auto [n, c, iy, ix] = coordinates<4>(flat, {op.mb, op.ic, op.ih, op.iw});
      for (Index k = 0; k < op.oc; ++k)
        for (Index ky = 0; ky < op.kh; ++ky)
          for (Index kx = 0; kx < op.kw; ++kx) {
            const Index ty = iy + op.ph - ky, tx = ix + op.pw - kx;
            if (ty < 0 || tx < 0 || ty % op.sh != 0 || tx % op.sw != 0) continue;
            const Index y = ty / op.sh, x = tx / op.sw;
            if (y >= oh || x >= ow) continue;
            dot.add(in[0][dst_at(n, k, y, x)], in[1][weight_at(k, c, ky, kx)]);
          }
      return dot;
    }
    case ConvDirection::backward_weights: {
      const auto [k, c, ky, kx] = coordinates<4>(flat, {op.oc, op.ic, op.kh, op.kw});
      for (Index n = 0; n < op.mb; ++n)
        for (Index y = 0; y < oh; ++y)
          for (Index x = 0; x < ow; ++x) {
            const Index iy = y * op.sh - op.ph + ky, ix = x * op.sw - op.pw + kx;
            if (iy < 0 || iy >= op.ih || ix < 0 || ix >= op.iw) continue;
            dot.add(in[0][src_at(n, c, iy, ix)], in[1][dst_at(n, k, y, x)]);
          }
      return dot;
    }
  }
  return dot;
}

Dot fully_connected_at(const FullyConnectedOp& op, int output,
                       std::span<const std::vector<double>> in, Index flat) {
  Dot dot;
  switch (op.direction) {
    case ConvDirection::forward: {  // src [mb, in], weights [out, in], bias [out] -> dst
      const auto [n, o] = coordinates<2>(flat, {op.mb, op.out});
      for (Index i = 0; i < op.in; ++i) dot.add(in[0][n * op.in + i], in[1][o * op.in + i]);
      dot.add(in[2][o], 1.0);
      return dot;
    }
    case ConvDirection::backward_data: {  // diff_dst, weights -> diff_src [mb, in]
      const auto [n, i] = coordinates<2>(flat, {op.mb, op.in});
      for (Index o = 0; o < op.out; ++o) dot.add(in[0][n * op.out + o], in[1][o * op.in + i]);
      return dot;
    }
    case ConvDirection::backward_weights: {  // src, diff_dst -> diff_weights, diff_bias
      if (output == 3) {
        for (Index n = 0; n < op.mb; ++n) dot.add(in[1][n * op.out + flat], 1.0);
        return dot;
      }
      const auto [o, i] = coordinates<2>(flat, {op.out, op.in});
      for (Index n = 0; n < op.mb; ++n) dot.add(in[1][n * op.out + o], in[0][n * op.in + i]);
      return dot;
    }
  }
  return dot;
}

// GEMM: the sample is a logical element (batch, head, i, j) of C; its index is where the
// stored C holds it.
Dot gemm_at(const GemmOp& op, std::span<const std::vector<double>> in, Index logical,
            Index* stored) {
  const GemmOperandLayout la = gemm_layout(op, GemmOperand::a),
                          lb = gemm_layout(op, GemmOperand::b),
                          lc = gemm_layout(op, GemmOperand::c);
  const auto [batch, head, i, j] = coordinates<4>(logical, {op.batch, op.heads, op.m, op.n});
  Dot dot;
  for (Index p = 0; p < op.k; ++p)
    dot.add(in[0][batch * la.batch + head * la.head + i * la.row + p * la.col],
            in[1][batch * lb.batch + head * lb.head + p * lb.row + j * lb.col]);
  dot.value *= op.alpha;
  dot.magnitude *= std::fabs(op.alpha);
  *stored = batch * lc.batch + head * lc.head + i * lc.row + j * lc.col;
  return dot;
}

Index output_elements(const OpDesc& desc, int output) {
  if (const auto* op = std::get_if<GemmOp>(&desc)) return op->batch * op->heads * op->m * op->n;
  if (const auto* op = std::get_if<ConvOp>(&desc)) {
    switch (op->direction) {
      case ConvDirection::forward:
        return op->mb * op->oc * op->oh() * op->ow();
      case ConvDirection::backward_data:
        return op->mb * op->ic * op->ih * op->iw;
      case ConvDirection::backward_weights:
        return op->oc * op->ic * op->kh * op->kw;
    }
  }
  if (const auto* op = std::get_if<FullyConnectedOp>(&desc)) {
    switch (op->direction) {
      case ConvDirection::forward:
        return op->mb * op->out;
      case ConvDirection::backward_data:
        return op->mb * op->in;
      case ConvDirection::backward_weights:
        return output == 3 ? op->out : op->out * op->in;
    }
  }
  return 0;
}

}  // namespace

std::int64_t reference_multiply_adds(const OpDesc& desc) {
  if (const auto* op = std::get_if<GemmOp>(&desc))
    return op->batch * op->heads * op->m * op->n * op->k;
  if (const auto* op = std::get_if<ConvOp>(&desc))
    return op->mb * op->oc * op->oh() * op->ow() * op->ic * op->kh * op->kw;
  if (const auto* op = std::get_if<FullyConnectedOp>(&desc)) return op->mb * op->in * op->out;
  return 0;
}

bool has_sampled_reference(const OpDesc& desc) {
  if (const auto* op = std::get_if<GemmOp>(&desc)) return op->beta == 0;  // C is not read
  return std::holds_alternative<ConvOp>(desc) || std::holds_alternative<FullyConnectedOp>(desc);
}

SampledOutput sample_reference(const OpDesc& desc, int output,
                               std::span<const std::vector<double>> operands, std::int64_t samples,
                               std::uint64_t seed) {
  SampledOutput out;
  const Index elements = output_elements(desc, output);
  if (elements <= 0) return out;
  for (Index s = 0; s < samples; ++s) {
    Index where = sample_index(seed, s, elements);
    Dot dot;
    if (const auto* op = std::get_if<GemmOp>(&desc)) dot = gemm_at(*op, operands, where, &where);
    if (const auto* op = std::get_if<ConvOp>(&desc)) dot = conv_at(*op, operands, where);
    if (const auto* op = std::get_if<FullyConnectedOp>(&desc))
      dot = fully_connected_at(*op, output, operands, where);
    out.index.push_back(where);
    out.value.push_back(dot.value);
    out.magnitude.push_back(dot.magnitude);
  }
  return out;
}

}  // namespace tb
