// The f64 reference of a product op (GEMM, convolution, fully connected layer) at sampled
// output elements, one dot product each: what the op-by-op check of a full-size network
// compares where the whole f64 op would take minutes (a ResNet-50 step at batch 32 is about
// 400 GFLOP of naive f64 loops; 256 samples of each output cost a few million products).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/ops.h"

namespace tb {

// True when sample_reference() can compute this op's outputs (a linear product without beta);
// its full f64 reference costs multiply_adds(op) (backends/ops.h).
bool has_sampled_reference(const OpDesc& op);

// Sampled elements of one output: where each lies in the output (plain, as the op's operand
// list gives it), its f64 value and the same sum over the terms' absolute values (the scale
// against which a cancelled output is judged).
struct SampledOutput {
  std::vector<std::int64_t> index;
  std::vector<double> value, magnitude;
};

// Each input's plain values, as doubles, bound to the names the op declares its operands by
// (`values` in the declaration's order; outputs may be empty).
class OperandValues {
 public:
  OperandValues(std::span<const OperandSpec> specs, std::span<const std::vector<double>> values);
  // Throws std::logic_error for a name the op does not declare.
  const std::vector<double>& operator[](std::string_view name) const;

 private:
  std::span<const OperandSpec> specs_;
  std::span<const std::vector<double>> values_;
};

// `samples` seeded elements of the output operand called `output`, from `inputs`.
SampledOutput sample_reference(const OpDesc& op, std::string_view output,
                               const OperandValues& inputs, std::int64_t samples,
                               std::uint64_t seed);

// The same, planned before the op runs, so that only the elements the sums read leave the device
// (Backend::gather_operand): the sampled outputs and, per operand, the plain positions the sums
// read. Sums that are long (a weight gradient sums over the whole batch) take fewer samples: at
// least kMinSamples, then more only while the terms so far are under kTermBudget. An operand
// whose reads come to more than 1/kDenseFraction of it is read whole instead (`dense`).
struct SamplePlan {
  std::vector<std::int64_t> logical;  // each sample's element, as sample_reference draws it
  std::vector<std::int64_t> stored;   // where the output holds it (a GEMM's C may be strided)
  std::vector<std::vector<std::int64_t>> reads;  // by operand: sorted, distinct plain positions
  std::vector<bool> dense;                       // by operand: read whole, `reads` empty
};
inline constexpr std::int64_t kDenseFraction = 8;
inline constexpr std::int64_t kMinSamples = 16;
inline constexpr std::int64_t kTermBudget = std::int64_t{1} << 22;
SamplePlan plan_samples(const OpDesc& op, std::span<const OperandSpec> specs,
                        std::string_view output, std::int64_t samples, std::uint64_t seed);

// One operand's values as a plan's samples need them: every value (`index` empty), or the
// values at `index` (a SamplePlan's reads) in the same order.
struct GatheredValues {
  std::vector<std::int64_t> index;
  std::vector<double> value;
};
// The planned samples' f64 values from `inputs` (by operand, as the specs declare them).
SampledOutput sample_reference(const OpDesc& op, std::span<const OperandSpec> specs,
                               std::string_view output, std::span<const GatheredValues> inputs,
                               const SamplePlan& plan);

}  // namespace tb
