// Fused attention (AttentionOp) through cuDNN's scaled-dot-product-attention operations of the
// graph API (CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR / _BWD_, cuDNN 9.17 and later): one
// flash-attention node each way, bf16 or f16 data with fp32 softmax statistics, padding by
// each sequence's key length. Queries, keys, values and their gradients stay head-interleaved
// as the linear layers write them (the strides say so); nothing is transposed.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/cudnn_graph.h"

namespace tb::cuda {

// The first cuDNN with the SDPA operations (cudnnGetVersion's encoding).
inline constexpr std::size_t kCudnnSdpaVersion = 91700;

// Why cuDNN `version` cannot run `op` on a GPU of `compute_capability` (major * 10 + minor;
// empty when it can): the dtype (bf16 and f16 only), the head size (a multiple of 8, at most
// 256 on Hopper and later, 128 before: the backward's limit there), the library's version.
std::string attention_unsupported_reason(const AttentionOp& op, std::size_t version,
                                         int compute_capability);

// A [batch, sequence, heads, head_dim] operand as cuDNN's logical [b, h, s, d] with the strides
// of its real layout.
TensorSpec interleaved_attention_tensor(std::int64_t uid, const AttentionOp& op);

// The engine is heuristic A's first configuration that builds a plan; its workspace is the
// plan's, and the report names it.
Status plan_cudnn_attention(cudnnHandle_t handle, const AttentionOp& op, int compute_capability,
                            std::unique_ptr<Plan>* out);

}  // namespace tb::cuda
