// The double-precision reference as a backend: the shared CPU code (plan_shared_training_op)
// on ordinary host memory, without thread placement or clock measurement of its own, so a
// step on any backend, a GPU's included, is checked against the same f64 ops.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace tb::cpu {

std::unique_ptr<Backend> make_host_reference_backend();

}  // namespace tb::cpu
