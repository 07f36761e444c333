// Batch norm through cuDNN's graph API: the training forward (CUDNN_BACKEND_OPERATION_NORM_
// FORWARD_DESCRIPTOR, batch-norm mode, training phase: batch statistics, normalized output and
// the running statistics' update in one node) and the backward (NORM_BACKWARD: the input, scale
// and shift gradients), on channels-last 16-bit data with fp32 scale, shift and statistics, as
// cuDNN's batch-norm engines take them. The op's fused ReLU and its mask are a kernel after the
// forward node and before the backward one; cuDNN keeps 1 / sqrt(variance + epsilon) where the
// op's operands hold the batch variance, and a kernel converts. Inference stays the own kernel:
// a per-channel affine map, which cuDNN's own graph for it also runs as pointwise nodes.
#pragma once

#include <cudnn.h>

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/cudnn_graph.h"

namespace tb::cuda {

// Why cuDNN's batch norm is not tried for `op` (empty when it is): inference, or activations
// that are not channels-last 16-bit data.
std::string cudnn_batch_norm_skip_reason(const BatchNormOp& op);

// What the batch-norm graph and its plan depend on (not epsilon or momentum, which go by value
// at every execution, nor the fused ReLU, which is a kernel), as the cache's key.
std::string batch_norm_graph_key(const BatchNormOp& op);

// A batch norm's graph and plan, or why no engine builds one, and those built so far by
// batch_norm_graph_key: a network's 106 batch norms (ResNet-50) build a few dozen.
struct NormGraphEntry;
using NormGraphCache = KeyedCache<NormGraphEntry>;

// Unimplemented, with cuDNN's reason, when no engine builds a plan for the node; the caller
// then runs the own kernels.
Status plan_cudnn_batch_norm(cudnnHandle_t handle, NormGraphCache& cache, const BatchNormOp& op,
                             std::unique_ptr<Plan>* out);

}  // namespace tb::cuda
