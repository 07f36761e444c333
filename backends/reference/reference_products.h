// The f64 products: GEMM, convolution, fully connected and fused attention, each output element
// from backends/product_reference.h (the loops workload validation and the op check also use).
// They are the reference only: no library's kernel, and never reported as a backend's speed.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace tb::cpu {

// What the host plans an op with: an f64 product here, anything else with the shared CPU
// kernels (cpu_kernels/training_ops.h), which answer Unimplemented for the products in other
// dtypes. The reference backend and the CPU backends' ops their library lacks come here.
Status plan_host_op(const OpDesc& op, std::unique_ptr<Plan>* out);

}  // namespace tb::cpu
