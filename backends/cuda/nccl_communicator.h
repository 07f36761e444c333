// NCCL collectives on the cuda backend's device memory: one communicator over the ranks of a
// World, bootstrapped by broadcasting rank 0's ncclUniqueId through World::broadcast_bytes,
// its collectives queued on its own stream and timed with events on it.
#pragma once

#include <memory>
#include <string>

#include "backends/communicator.h"
#include "backends/cuda/event_timer.h"

namespace tb::cuda {

// The version of the NCCL library this process runs ("2.28.9").
std::string nccl_version();

// On the current device (the backend's). Every rank of `world` must call it together.
Status make_nccl_communicator(World& world, std::shared_ptr<Health> health,
                              std::unique_ptr<Communicator>* out);

}  // namespace tb::cuda
