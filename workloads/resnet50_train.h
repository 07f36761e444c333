// What other code needs of the resnet50-train kind (resnet50_train.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "workloads/descriptor.h"

namespace tb {

// batch=sweep: batch 1, 2, 4, ... and the largest batch whose planned step fits in
// `memory_available` on `backend` (null: unusable, one case); other descriptors unchanged.
std::vector<Descriptor> expand_resnet50_sweep(const Descriptor& descriptor, Backend* backend,
                                              std::uint64_t memory_available);

}  // namespace tb
