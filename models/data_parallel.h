// What a data-parallel step is checked with: each rank's slice of one seeded global batch, the
// weights of every rank compared bit for bit, and the reference a data-parallel step must equal.
//
// Batch norm is per rank, as in PyTorch's DDP without SyncBatchNorm: each rank normalizes
// with its own slice's statistics, so a ResNet step across ranks is not the step of one process
// on the global batch. The honest reference is one process stepping on each rank's slice
// separately (the slices as separate batch-norm groups) and averaging the gradients:
// mean_gradients_of_slices(). For a network without batch norm and without dropout (BERT at
// dropout 0: layer norm is per row) that is the global-batch step itself, which the tests check
// too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/communicator.h"
#include "models/network.h"
#include "models/training_step.h"

namespace tb {

// Slice `rank` of `ranks` of `batch`, a batch of `global` (every input sample-major: images,
// labels, token rows, per-sequence values): each input's `1 / ranks` share, in order. Row ids
// that a gather_rows layer reads (BERT's masked and first-token rows index the whole batch's
// rows) are rebased to the slice. InvalidArgument when the batch does not split evenly or a
// row id falls outside its slice.
Status batch_slice(const Network& global, const std::vector<NamedTensor>& batch, int rank,
                   int ranks, std::vector<NamedTensor>* out);

// Whether every rank holds bitwise the same weights: each rank hashes each parameter's values,
// rank 0's hashes go to all, and every rank learns the first parameter that differs anywhere
// (empty when none does). Every rank must call it.
Status compare_weights_across_ranks(World& world, TrainingStep& step, std::string* first_different);

// The gradients a data-parallel step over these slices must have: one process
// steps on each slice alone with `options` (data_parallel_ranks 1, dropout seed
// dropout_seeds[r] for slice r), from the same weights, and averages the gradients.
Status mean_gradients_of_slices(Backend& backend, const Network& local, const StepOptions& options,
                                const std::vector<std::vector<NamedTensor>>& slices,
                                const std::vector<std::uint64_t>& dropout_seeds,
                                std::uint64_t weight_seed, std::vector<NamedTensor>* out);

// A rank's dropout seed: its masks differ from every other rank's, as each rank's samples do.
std::uint64_t rank_dropout_seed(std::uint64_t seed, int rank);

}  // namespace tb
