#include "models/sampled_reference.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <stdexcept>

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

// `in(name)`: the values of the operand called `name`, as product_reference.h reads them.
template <typename Read>
ProductSum conv_at(const ConvOp& op, const Read& in, Index flat) {
  const Index oh = op.oh(), ow = op.ow();
  switch (op.direction) {
    case ConvDirection::forward: {
      const auto [n, k, y, x] = coordinates<4>(flat, {op.mb, op.oc, oh, ow});
      ProductSum sum = reference::conv_forward_element(op, in("src"), in("weights"), n, k, y, x);
      if (op.epilogue != ConvEpilogue::none)
        reference::add_bias(sum, in("bias")[k], op.epilogue == ConvEpilogue::bias_relu);
      return sum;
    }
    case ConvDirection::backward_data: {
      const auto [n, c, iy, ix] = coordinates<4>(flat, {op.mb, op.ic, op.ih, op.iw});
      return reference::conv_backward_data_element(op, in("diff_dst"), in("weights"), n, c, iy, ix);
    }
    case ConvDirection::backward_weights: {
      const auto [k, c, ky, kx] = coordinates<4>(flat, {op.oc, op.ic, op.kh, op.kw});
      return reference::conv_backward_weights_element(op, in("src"), in("diff_dst"), k, c, ky, kx);
    }
  }
  return {};
}

template <typename Read>
ProductSum fully_connected_at(const FullyConnectedOp& op, std::string_view output, const Read& in,
                              Index flat) {
  switch (op.direction) {
    case ConvDirection::forward: {
      const auto [n, o] = coordinates<2>(flat, {op.mb, op.out});
      ProductSum sum = reference::fully_connected_element(op, in("src"), in("weights"), n, o);
      reference::add_bias(sum, in("bias")[o], false);
      return sum;
    }
    case ConvDirection::backward_data: {
      const auto [n, i] = coordinates<2>(flat, {op.mb, op.in});
      return reference::fully_connected_element(op, in("diff_dst"), in("weights"), n, i);
    }
    case ConvDirection::backward_weights: {
      if (output == "diff_bias")
        return reference::fully_connected_bias_gradient_element(op, in("diff_dst"), flat);
      const auto [o, i] = coordinates<2>(flat, {op.out, op.in});
      return reference::fully_connected_element(op, in("diff_dst"), in("src"), o, i);
    }
  }
  return {};
}

// GEMM: the sample is a logical element (batch, head, i, j) of C; its index is where the
// stored C holds it.
template <typename Read>
ProductSum gemm_at(const GemmOp& op, const Read& in, Index logical, Index* stored) {
  const GemmOperandLayout lc = gemm_layout(op, GemmOperand::c);
  const auto [batch, head, i, j] = coordinates<4>(logical, {op.batch, op.heads, op.m, op.n});
  *stored = batch * lc.batch + head * lc.head + i * lc.row + j * lc.col;
  return reference::gemm_element(op, in("a"), in("b"), batch, head, i, j);
}

// Sample `logical` of `output`, and where the output stores it.
template <typename Read>
ProductSum sample_at(const OpDesc& desc, std::string_view output, const Read& in, Index logical,
                     Index* stored) {
  *stored = logical;
  if (const auto* op = std::get_if<GemmOp>(&desc)) return gemm_at(*op, in, logical, stored);
  if (const auto* op = std::get_if<ConvOp>(&desc)) return conv_at(*op, in, logical);
  if (const auto* op = std::get_if<FullyConnectedOp>(&desc))
    return fully_connected_at(*op, output, in, logical);
  return {};
}

// The positions of one operand a plan's samples read: a bit each, so that recording millions of
// reads costs a store each and no sort.
class PositionSet {
 public:
  explicit PositionSet(Index elements = 0)
      : words_(static_cast<std::size_t>((elements + 63) / 64), 0) {}
  void insert(Index position) {
    words_[static_cast<std::size_t>(position >> 6)] |= std::uint64_t{1} << (position & 63);
  }
  // Every position held, in increasing order.
  std::vector<Index> positions() const {
    std::vector<Index> out;
    for (std::size_t w = 0; w < words_.size(); ++w)
      for (std::uint64_t bits = words_[w]; bits != 0; bits &= bits - 1)
        out.push_back(static_cast<Index>(w * 64) + std::countr_zero(bits));
    return out;
  }

 private:
  std::vector<std::uint64_t> words_;
};

// Reads nothing but where: each read is counted, in all and for its operand, and its position
// recorded (null `reads`: only counted), its value taken as 0.
class RecordedReads {
 public:
  RecordedReads(PositionSet* reads, std::int64_t* all, std::int64_t* own, Index base)
      : reads_(reads), all_(all), own_(own), base_(base) {}
  double operator[](Index i) const {
    ++*all_, ++*own_;
    if (reads_) reads_->insert(base_ + i);
    return 0.0;
  }
  RecordedReads operator+(Index offset) const { return {reads_, all_, own_, base_ + offset}; }

 private:
  PositionSet* reads_;
  std::int64_t *all_, *own_;
  Index base_;
};

// Where each of a set of positions sits among them (its rank), in constant time: a bit per
// position up to the largest, and the count of set bits before each 64-bit word. A sampled
// sum reads millions of gathered values; a binary search per read cost seconds.
class PositionRanks {
 public:
  PositionRanks() = default;
  explicit PositionRanks(const std::vector<Index>& sorted) {
    if (sorted.empty()) return;
    const auto words = static_cast<std::size_t>(sorted.back() / 64 + 1);
    bits_.assign(words, 0);
    for (const Index position : sorted)
      bits_[static_cast<std::size_t>(position >> 6)] |= std::uint64_t{1} << (position & 63);
    before_.resize(words);
    std::int64_t count = 0;
    for (std::size_t w = 0; w < words; ++w) {
      before_[w] = count;
      count += std::popcount(bits_[w]);
    }
  }
  // The rank of `position`, or -1 where the set does not hold it.
  std::int64_t rank(Index position) const {
    const auto word = static_cast<std::size_t>(position >> 6);
    if (position < 0 || word >= bits_.size()) return -1;
    const std::uint64_t bit = std::uint64_t{1} << (position & 63);
    if (!(bits_[word] & bit)) return -1;
    return before_[word] + std::popcount(bits_[word] & (bit - 1));
  }

 private:
  std::vector<std::uint64_t> bits_;
  std::vector<std::int64_t> before_;
};

// An operand's gathered values, read by plain position (`ranks` null: every value gathered).
class GatheredReads {
 public:
  GatheredReads(const GatheredValues* values, const PositionRanks* ranks, Index base)
      : values_(values), ranks_(ranks), base_(base) {}
  double operator[](Index i) const {
    const Index at = base_ + i;
    if (!ranks_) return values_->value[static_cast<std::size_t>(at)];
    const std::int64_t rank = ranks_->rank(at);
    if (rank < 0) throw std::logic_error("a sampled sum read a value its plan did not gather");
    return values_->value[static_cast<std::size_t>(rank)];
  }
  GatheredReads operator+(Index offset) const { return {values_, ranks_, base_ + offset}; }

 private:
  const GatheredValues* values_;
  const PositionRanks* ranks_;
  Index base_;
};

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

bool has_sampled_reference(const OpDesc& desc) {
  if (const auto* op = std::get_if<GemmOp>(&desc)) return op->beta == 0;  // C is not read
  return is_linear_product(desc);
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
  auto read = [&](std::string_view name) { return operands[name].data(); };
  for (Index s = 0; s < samples; ++s) {
    Index where = 0;
    const ProductSum dot = sample_at(desc, output, read, sample_index(seed, s, elements), &where);
    out.index.push_back(where);
    out.value.push_back(dot.value);
    out.magnitude.push_back(dot.magnitude);
  }
  return out;
}

SamplePlan plan_samples(const OpDesc& desc, std::span<const OperandSpec> specs,
                        std::string_view output, std::int64_t samples, std::uint64_t seed) {
  SamplePlan plan;
  plan.reads.resize(specs.size());
  plan.dense.assign(specs.size(), false);
  const Index elements = output_elements(desc, output);
  if (elements <= 0) return plan;
  std::vector<PositionSet> sets;
  for (const OperandSpec& spec : specs) sets.emplace_back(static_cast<Index>(spec.elements()));
  std::int64_t reads_so_far = 0;                     // every read, repeats included
  std::vector<std::int64_t> reads(specs.size(), 0);  // likewise, by operand
  auto record = [&](std::string_view name) {
    const auto i = static_cast<std::size_t>(operand_index(specs, name));
    return RecordedReads(plan.dense[i] ? nullptr : &sets[i], &reads_so_far, &reads[i], 0);
  };
  for (Index s = 0; s < samples && (s < kMinSamples || reads_so_far < kTermBudget); ++s) {
    const Index logical = sample_index(seed, s, elements);
    Index stored = 0;
    sample_at(desc, output, record, logical, &stored);
    plan.logical.push_back(logical);
    plan.stored.push_back(stored);
    if (s > 0) continue;
    // The samples to come read about as much each: an operand they would read much of is read
    // whole, its positions no longer recorded.
    const std::int64_t expected =
        std::clamp(kTermBudget / std::max<std::int64_t>(reads_so_far, 1), kMinSamples, samples);
    for (std::size_t i = 0; i < specs.size(); ++i)
      if (reads[i] * expected * kDenseFraction > static_cast<std::int64_t>(specs[i].elements())) {
        plan.dense[i] = true;
        sets[i] = PositionSet();
      }
  }
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (!plan.dense[i]) plan.reads[i] = sets[i].positions();
  return plan;
}

SampledOutput sample_reference(const OpDesc& desc, std::span<const OperandSpec> specs,
                               std::string_view output, std::span<const GatheredValues> inputs,
                               const SamplePlan& plan) {
  SampledOutput out;
  out.index = plan.stored;
  out.value.resize(plan.logical.size());
  out.magnitude.resize(plan.logical.size());
  std::vector<PositionRanks> ranks;
  for (const GatheredValues& values : inputs) ranks.emplace_back(values.index);
  auto read = [&](std::string_view name) {
    const auto i = static_cast<std::size_t>(operand_index(specs, name));
    return GatheredReads(&inputs[i], inputs[i].index.empty() ? nullptr : &ranks[i], 0);
  };
  const auto samples = static_cast<std::int64_t>(plan.logical.size());
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t s = 0; s < samples; ++s) {
    Index stored = 0;
    const ProductSum dot = sample_at(desc, output, read, plan.logical[s], &stored);
    out.value[static_cast<std::size_t>(s)] = dot.value;
    out.magnitude[static_cast<std::size_t>(s)] = dot.magnitude;
  }
  return out;
}

}  // namespace tb
