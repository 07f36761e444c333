// Each layer of a training step against its own ceiling: the layer's product ops (GEMM,
// convolution, fully connected, attention) timed alone, in the same run, on buffers of their
// own filled with seeded data and warm. A layer slower in the step than alone loses the
// difference to the model's surroundings (reorders between layers, caches its neighbours
// evicted, waits); one slow alone loses it to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "models/training_step.h"

namespace tb {

// Median seconds of `reps` executions after one warm-up, per op; each distinct descriptor is
// planned and timed once and its time reused for the ops equal to it.
struct StandaloneTiming {
  int reps = 3;
};

// `seconds[l]`: the sum over layer l's ops in `ops` of each op's time alone (0 for a layer
// with none); `layers` entries.
Status time_product_ops_alone(Backend& backend, const std::vector<LayerProductOp>& ops,
                              std::size_t layers, std::uint64_t seed,
                              const StandaloneTiming& timing, std::vector<double>* seconds);

}  // namespace tb
