#include "models/data_parallel.h"

#include <cstring>
#include <map>

#include <fmt/format.h>

#include "backends/seeded.h"
#include "models/reference_check.h"

namespace tb {

Status batch_slice(const Network& global, const std::vector<NamedTensor>& batch, int rank,
                   int ranks, std::vector<NamedTensor>* out) {
  if (ranks < 1 || global.batch % ranks != 0)
    return Status::InvalidArgument(fmt::format(
        "a batch of {} samples cannot be split evenly across {} ranks", global.batch, ranks));
  // Row ids into a gather_rows layer's source: the rows of a slice.
  std::map<std::string, std::int64_t> slice_rows;
  for (const Layer& layer : global.layers()) {
    if (layer.kind != LayerKind::gather_rows) continue;
    for (const NetworkInput& input : global.inputs())
      if (input.tensor == layer.inputs.at(1))
        slice_rows[input.name] = global.tensors()[layer.inputs[0]].n / ranks;
  }
  out->clear();
  for (const NamedTensor& tensor : batch) {
    const std::size_t share = tensor.values.size() / static_cast<std::size_t>(ranks);
    if (tensor.dims.empty() || tensor.dims[0] % ranks != 0 ||
        share * static_cast<std::size_t>(ranks) != tensor.values.size())
      return Status::InvalidArgument(
          fmt::format("'{}' ({} values) cannot be split evenly across {} ranks", tensor.name,
                      tensor.values.size(), ranks));
    NamedTensor slice{tensor.name, tensor.dims, {}, tensor.integer};
    slice.dims[0] /= ranks;
    const auto first = tensor.values.begin() + static_cast<std::ptrdiff_t>(share * rank);
    slice.values.assign(first, first + static_cast<std::ptrdiff_t>(share));
    if (const auto rows = slice_rows.find(tensor.name); rows != slice_rows.end()) {
      const auto count = static_cast<double>(rows->second);
      for (double& row : slice.values) {
        row -= count * rank;
        if (row < 0 || row >= count)
          return Status::InvalidArgument(
              fmt::format("'{}' indexes a row outside its rank's slice", tensor.name));
      }
    }
    out->push_back(std::move(slice));
  }
  return Status::Ok();
}

Status compare_weights_across_ranks(World& world, TrainingStep& step,
                                    std::string* first_different) {
  std::vector<NamedTensor> state;
  TB_RETURN_IF_ERROR(step.state(&state));
  std::vector<NamedTensor> weights;  // parameters only: running statistics are per rank
  std::vector<NamedTensor> grads;
  TB_RETURN_IF_ERROR(step.gradients(&grads));
  std::map<std::string, bool> is_parameter;
  for (const NamedTensor& grad : grads) is_parameter[grad.name] = true;
  std::vector<std::uint64_t> hashes;
  for (const NamedTensor& tensor : state) {
    if (!is_parameter.count(tensor.name)) continue;
    std::uint64_t hash = mix64(tensor.values.size());
    for (double value : tensor.values) {  // the master dtype's values, exact in double
      std::uint64_t bits = 0;
      std::memcpy(&bits, &value, sizeof(bits));
      hash = mix64(hash ^ bits);
    }
    hashes.push_back(hash);
    weights.push_back(tensor);
  }
  std::vector<std::uint64_t> root = hashes;
  TB_RETURN_IF_ERROR(
      world.broadcast_bytes(root.data(), root.size() * sizeof(std::uint64_t), /*root=*/0));
  double first = -1;  // the first differing parameter on this rank
  for (std::size_t p = 0; p < hashes.size() && first < 0; ++p)
    if (hashes[p] != root[p]) first = static_cast<double>(hashes.size() - p);
  // The largest of size - p over the ranks is the smallest differing index anywhere.
  const double anywhere = world.max(first);
  first_different->clear();
  if (anywhere > 0)
    *first_different = weights[hashes.size() - static_cast<std::size_t>(anywhere)].name;
  return Status::Ok();
}

Status mean_gradients_of_slices(Backend& backend, const Network& local, const StepOptions& options,
                                const std::vector<std::vector<NamedTensor>>& slices,
                                const std::vector<std::uint64_t>& dropout_seeds,
                                std::uint64_t weight_seed, std::vector<NamedTensor>* out) {
  out->clear();
  for (std::size_t r = 0; r < slices.size(); ++r) {
    StepOptions alone = options;
    alone.data_parallel_ranks = 1;
    alone.dropout_seed = dropout_seeds.at(r);
    std::unique_ptr<TrainingStep> step;
    TB_RETURN_IF_ERROR(prepared_step(backend, local, alone, slices[r], weight_seed, &step));
    TB_RETURN_IF_ERROR(step->run(/*update=*/false, {}));
    std::vector<NamedTensor> grads;
    TB_RETURN_IF_ERROR(step->gradients(&grads));
    if (out->empty()) {
      *out = std::move(grads);
      continue;
    }
    for (std::size_t p = 0; p < grads.size(); ++p)
      for (std::size_t i = 0; i < grads[p].values.size(); ++i)
        (*out)[p].values[i] += grads[p].values[i];
  }
  for (NamedTensor& grad : *out)
    for (double& value : grad.values) value /= static_cast<double>(slices.size());
  return Status::Ok();
}

std::uint64_t rank_dropout_seed(std::uint64_t seed, int rank) {
  return rank == 0 ? seed : mix64(seed + static_cast<std::uint64_t>(rank) * kGoldenGamma);
}

}  // namespace tb
