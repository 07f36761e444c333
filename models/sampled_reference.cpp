#include "models/sampled_reference.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "backends/operands.h"
#include "backends/product_reference.h"
#include "backends/seeded.h"

namespace tb {
namespace {

using Index = std::int64_t;
using reference::ProductSum;

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

ProductSum conv_at(const ConvOp& op, const OperandValues& in, Index flat) {
  const Index oh = op.oh(), ow = op.ow();
  switch (op.direction) {
    case ConvDirection::forward: {
      const auto [n, k, y, x] = coordinates<4>(flat, {op.mb, op.oc, oh, ow});
      ProductSum sum =
          reference::conv_forward_element(op, in["src"].data(), in["weights"].data(), n, k, y, x);
      if (op.epilogue != ConvEpilogue::none)
        reference::add_bias(sum, in["bias"][k], op.epilogue == ConvEpilogue::bias_relu);
      return sum;
    }
    case ConvDirection::backward_data: {
      const auto [n, c, iy, ix] = coordinates<4>(flat, {op.mb, op.ic, op.ih, op.iw});
      return reference::conv_backward_data_element(op, in["diff_dst"].data(), in["weights"].data(),
                                                   n, c, iy, ix);
    }
    case ConvDirection::backward_weights: {
      const auto [k, c, ky, kx] = coordinates<4>(flat, {op.oc, op.ic, op.kh, op.kw});
      return reference::conv_backward_weights_element(op, in["src"].data(), in["diff_dst"].data(),
                                                      k, c, ky, kx);
    }
  }
  return {};
}

ProductSum fully_connected_at(const FullyConnectedOp& op, std::string_view output,
                              const OperandValues& in, Index flat) {
  switch (op.direction) {
    case ConvDirection::forward: {
      const auto [n, o] = coordinates<2>(flat, {op.mb, op.out});
      ProductSum sum =
          reference::fully_connected_element(op, in["src"].data(), in["weights"].data(), n, o);
      reference::add_bias(sum, in["bias"][o], false);
      return sum;
    }
    case ConvDirection::backward_data: {
      const auto [n, i] = coordinates<2>(flat, {op.mb, op.in});
      return reference::fully_connected_element(op, in["diff_dst"].data(), in["weights"].data(), n,
                                                i);
    }
    case ConvDirection::backward_weights: {
      if (output == "diff_bias")
        return reference::fully_connected_bias_gradient_element(op, in["diff_dst"].data(), flat);
      const auto [o, i] = coordinates<2>(flat, {op.out, op.in});
      return reference::fully_connected_element(op, in["diff_dst"].data(), in["src"].data(), o, i);
    }
  }
  return {};
}

// GEMM: the sample is a logical element (batch, head, i, j) of C; its index is where the
// stored C holds it.
ProductSum gemm_at(const GemmOp& op, const OperandValues& in, Index logical, Index* stored) {
  const GemmOperandLayout lc = gemm_layout(op, GemmOperand::c);
  const auto [batch, head, i, j] = coordinates<4>(logical, {op.batch, op.heads, op.m, op.n});
  *stored = batch * lc.batch + head * lc.head + i * lc.row + j * lc.col;
  return reference::gemm_element(op, in["a"].data(), in["b"].data(), batch, head, i, j);
}

Index output_elements(const OpDesc& desc, std::string_view output) {
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
        return output == "diff_bias" ? op->out : op->out * op->in;
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

OperandValues::OperandValues(std::span<const OperandSpec> specs,
                             std::span<const std::vector<double>> values)
    : specs_(specs), values_(values) {}

const std::vector<double>& OperandValues::operator[](std::string_view name) const {
  return values_[static_cast<std::size_t>(operand_index(specs_, name))];
}

SampledOutput sample_reference(const OpDesc& desc, std::string_view output,
                               const OperandValues& operands, std::int64_t samples,
                               std::uint64_t seed) {
  SampledOutput out;
  const Index elements = output_elements(desc, output);
  if (elements <= 0) return out;
  for (Index s = 0; s < samples; ++s) {
    Index where = sample_index(seed, s, elements);
    ProductSum dot;
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
