#include "models/training_memory.h"

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "models/precision.h"

namespace tb {
namespace {

// Each activation is kept for backward and has a gradient, and the tensors read twice have a
// partial gradient: 2.25 copies of every tensor, calibrated on the planned ResNet-50 step (fp32
// batch 32: 8.25 GB planned, 8.40 GB estimated; batch 85: 21.38 and 21.80 GB).
constexpr double kCopiesPerTensor = 2.25;

// The block a layer belongs to: its name up to the last all-digit component ("layer1.0.conv1"
// -> "layer1.0"); a layer without one ("conv1", "fc") is a block of its own.
std::string_view block_of(std::string_view name) {
  std::size_t end = std::string_view::npos;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t dot = std::min(name.find('.', start), name.size());
    const std::string_view part = name.substr(start, dot - start);
    if (!part.empty() &&
        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
      end = dot;
    start = dot + 1;
  }
  return end == std::string_view::npos ? name : name.substr(0, end);
}

struct Block {
  double bytes = 0;         // the tensors its layers write
  double output_bytes = 0;  // its last layer's output: what recomputation keeps
};

}  // namespace

int optimizer_values_per_parameter(OptimizerKind optimizer) {
  return optimizer == OptimizerKind::sgd_momentum ? 1 : 2;
}

TrainingMemory training_memory(const Network& network, const StepOptions& options) {
  const PrecisionPolicy policy = PrecisionPolicy::for_compute(options.dtype);
  const auto master = static_cast<double>(dtype_size(policy.master));
  const auto compute = static_cast<double>(dtype_size(policy.compute));
  const auto parameters = static_cast<double>(network.parameter_count());
  TrainingMemory m;
  m.weights = parameters * master;
  if (policy.mixed()) m.compute_weights = parameters * compute;
  // An evaluation step is planned as a training step is (its gradients and state unused).
  m.gradients = parameters * master;
  m.optimizer_state = optimizer_values_per_parameter(options.optimizer) * parameters * master;
  const double copies = kCopiesPerTensor;
  double inputs = 0;
  for (const NetworkInput& input : network.inputs())
    inputs += static_cast<double>(network.tensors()[input.tensor].elements()) * compute;
  std::map<std::string_view, Block> blocks;
  for (const Layer& layer : network.layers()) {
    const double bytes = static_cast<double>(network.tensors()[layer.output].elements()) *
                         static_cast<double>(dtype_size(policy.layer_dtype(layer.kind)));
    Block& block = blocks[block_of(layer.name)];
    block.bytes += bytes;
    block.output_bytes = bytes;
    double layer_weights = 0;
    for (int p : layer.params)
      layer_weights += static_cast<double>(network.parameters()[p].elements()) * compute;
    m.largest_layer_weights = std::max(m.largest_layer_weights, layer_weights);
  }
  double kept = inputs, largest_block = 0;
  m.activations = copies * inputs;
  for (const auto& [name, block] : blocks) {
    m.activations += copies * block.bytes;
    kept += block.output_bytes;
    largest_block = std::max(largest_block, block.bytes);
  }
  m.activations_recomputed = std::min(m.activations, kept + copies * largest_block);
  return m;
}

std::uint64_t estimate_training_bytes(const Network& network, const StepOptions& options) {
  return static_cast<std::uint64_t>(training_memory(network, options).total());
}

}  // namespace tb
