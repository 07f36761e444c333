// Fused attention (AttentionOp) through cuDNN's graph API, built as cudnn-frontend (v1.23) builds
// it on cuDNN 9.19: the forward as the native scaled-dot-product-attention node
// (CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, cuDNN 9.17 and later), the backward as the
// frontend's composite graph of 24 nodes (matmuls, pointwise ops, a sum and strided views), which
// every frontend release uses: cuDNN 9.19 on Hopper does not finalize the native backward node.
// bf16 or f16 data with fp32 softmax statistics, padding by each sequence's key length. Queries,
// keys, values and their gradients stay head-interleaved as the linear layers write them (the
// strides say so); nothing is transposed.
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

// The backward's workspace: an fp32 accumulator of dQ at 0, D = rowsum(dO o O) (fp32, one per
// query row) at softmax_sum_offset, the engine's own from engine_offset.
struct AttentionWorkspace {
  std::size_t softmax_sum_offset = 0, engine_offset = 0;
};
AttentionWorkspace attention_backward_workspace(const AttentionOp& op);

// Makes and finalizes every node of the backward's composite graph without a GPU (cuDNN checks
// each node's tensors as it finalizes it): how many there are, or the first one's error. The
// graph, its engines and the plan need a device.
Status finalize_backward_nodes(const AttentionOp& op, std::size_t* count);

// The engine is the first configuration of heuristic A, then of the fallback list, that builds a
// plan; its workspace is the plan's (after the backward's own), and the report names it.
Status plan_cudnn_attention(cudnnHandle_t handle, const AttentionOp& op, int compute_capability,
                            std::unique_ptr<Plan>* out);

}  // namespace tb::cuda
