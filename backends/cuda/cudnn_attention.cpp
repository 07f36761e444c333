#include "backends/cuda/cudnn_attention.h"

#include <cuda_runtime_api.h>

#include <vector>

#include <fmt/format.h>

#include "backends/cuda/cuda_plan.h"
#include "backends/operands.h"

namespace tb::cuda {
namespace {

// Tensor ids in the graphs and the variant packs.
enum Uid : std::int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kQueryLengths,
  kKeyLengths,
  kDiffO,
  kDiffQ,
  kDiffK,
  kDiffV
};

// One SDPA node, its graph and the plan made from it; the tensors live as long as the node.
struct AttentionGraph {
  std::vector<BackendDescriptor> tensors;
  BackendDescriptor operation, graph;
  BuiltPlan built;
};

Status make_node(cudnnHandle_t handle, const AttentionOp& op, AttentionGraph* g) {
#if CUDNN_VERSION < 91700
  (void)handle, (void)op, (void)g;
  return Status::Unimplemented(fmt::format(
      "cuda: built with cuDNN {} headers, which have no SDPA operation (9.17+)", CUDNN_VERSION));
#else
  const std::int64_t b = op.batch, h = op.heads, s = op.sequence;
  const bool forward = op.pass == Pass::forward;
  struct Binding {
    cudnnBackendAttributeName_t attribute;
    TensorSpec tensor;
  };
  const TensorSpec stats{kStats, DType::f32, {b, h, s, 1}, {h * s, s, 1, 1}, false};
  const TensorSpec scale{kScale, DType::f32, {1, 1, 1, 1}, {1, 1, 1, 1}, /*by_value=*/true};
  const TensorSpec query_lengths{kQueryLengths, DType::i32, {b, 1, 1, 1}, {1, 1, 1, 1}, false};
  const TensorSpec key_lengths{kKeyLengths, DType::i32, {b, 1, 1, 1}, {1, 1, 1, 1}, false};
  auto rows = [&](Uid uid) { return interleaved_attention_tensor(uid, op); };
  const std::vector<Binding> bindings =
      forward ? std::vector<Binding>{{CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, rows(kQ)},
                                     {CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, rows(kK)},
                                     {CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, rows(kV)},
                                     {CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, rows(kO)},
                                     {CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, stats},
                                     {CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale},
                                     {CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_QDESC, query_lengths},
                                     {CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_KVDESC, key_lengths}}
              : std::vector<Binding>{{CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, rows(kQ)},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, rows(kK)},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, rows(kV)},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, rows(kO)},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, stats},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, scale},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_SEQ_LEN_QDESC, query_lengths},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_SEQ_LEN_KVDESC, key_lengths},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, rows(kDiffO)},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, rows(kDiffQ)},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, rows(kDiffK)},
                                     {CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, rows(kDiffV)}};
  TB_RETURN_IF_ERROR(g->operation.create(forward ? CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR
                                                 : CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR));
  g->tensors.resize(bindings.size());
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    TB_RETURN_IF_ERROR(make_tensor(bindings[i].tensor, &g->tensors[i]));
    TB_RETURN_IF_ERROR(g->operation.set(bindings[i].attribute, g->tensors[i]));
  }
  TB_RETURN_IF_ERROR(g->operation.finalize());
  TB_RETURN_IF_ERROR(make_operation_graph(handle, g->operation, &g->graph));

  return first_buildable_plan(handle, g->graph, /*fp32_accumulation=*/false, "SDPA", &g->built);
#endif
}

// Device memory the plan owns: the query lengths (every query of a sequence is kept).
struct DeviceFree {
  void operator()(void* data) const { cudaFree(data); }
};

class CudnnAttentionPlan final : public CudaPlan {
 public:
  CudnnAttentionPlan(cudnnHandle_t handle, const AttentionOp& op,
                     std::unique_ptr<AttentionGraph> graph,
                     std::unique_ptr<void, DeviceFree> query_lengths)
      : handle_(handle),
        op_(op),
        graph_(std::move(graph)),
        query_lengths_(std::move(query_lengths)),
        scale_(op.scale) {
    operands_ = attention_operands(op);
    workspace_bytes_ = static_cast<std::size_t>(graph_->built.workspace);
    implementation_ = fmt::format(
        "cuDNN scaled dot-product attention {} (graph API SDPA operation, cuDNN {}), engine {} "
        "({}), workspace {} B",
        op.pass == Pass::forward ? "forward" : "backward", cudnn_runtime_version(),
        graph_->built.engine.global_index, graph_->built.engine.notes.describe(),
        graph_->built.workspace);
    math_mode_ = fmt::format("{} inputs, fp32 softmax and accumulation", dtype_name(op.dtype));
  }

  Status run(std::span<const Buffer> operands, Buffer workspace, cudaStream_t stream) override {
    TB_CUDNN(cudnnSetStream(handle_, stream));
    const BoundOperands b(operands_, operands);
    auto data = [&](std::string_view name) { return b.buffer(name).data; };
    void* const query_lengths = query_lengths_.get();
    void* const scale = &scale_;
    if (op_.pass == Pass::forward) {
      const std::int64_t ids[] = {kQ, kK, kV, kKeyLengths, kO, kStats, kScale, kQueryLengths};
      void* const pointers[] = {data("q"),   data("k"),     data("v"), data("key_lengths"),
                                data("out"), data("stats"), scale,     query_lengths};
      return execute_plan(handle_, graph_->built.plan, ids, pointers, workspace.data);
    }
    // Keys past a sequence's length get no gradient: cleared first, whether or not cuDNN
    // writes them.
    for (const char* name : {"diff_k", "diff_v"})
      TB_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(data(name), 0, b.spec(name).bytes, stream),
                                     "clearing the key and value gradients"));
    const std::int64_t ids[] = {kQ,     kK,     kV,     kKeyLengths, kO,     kStats,
                                kDiffO, kDiffQ, kDiffK, kDiffV,      kScale, kQueryLengths};
    void* const pointers[] = {data("q"),           data("k"),      data("v"),
                              data("key_lengths"), data("out"),    data("stats"),
                              data("diff_out"),    data("diff_q"), data("diff_k"),
                              data("diff_v"),      scale,          query_lengths};
    return execute_plan(handle_, graph_->built.plan, ids, pointers, workspace.data);
  }

 private:
  cudnnHandle_t handle_;
  AttentionOp op_;
  std::unique_ptr<AttentionGraph> graph_;
  std::unique_ptr<void, DeviceFree> query_lengths_;
  float scale_;  // handed over by value at every execution
};

}  // namespace

std::string attention_unsupported_reason(const AttentionOp& op, std::size_t version,
                                         int compute_capability) {
  if (op.dtype != DType::bf16 && op.dtype != DType::f16)
    return fmt::format("cuDNN's fused attention runs on bf16 and f16 data, not {}",
                       dtype_name(op.dtype));
  const std::int64_t largest = compute_capability >= 90 ? 256 : 128;
  if (op.head_dim % 8 != 0 || op.head_dim > largest)
    return fmt::format(
        "cuDNN's fused attention needs a head size that is a multiple of 8, at most {} on "
        "compute capability {}.{} (not {})",
        largest, compute_capability / 10, compute_capability % 10, op.head_dim);
  if (version < kCudnnSdpaVersion)
    return fmt::format("cuDNN {}.{} has no SDPA operation (9.17 and later)", version / 10000,
                       version / 100 % 100);
  return "";
}

TensorSpec interleaved_attention_tensor(std::int64_t uid, const AttentionOp& op) {
  const std::int64_t h = op.heads, s = op.sequence, d = op.head_dim;
  return {uid, op.dtype, {op.batch, h, s, d}, {s * h * d, d, h * d, 1}, /*by_value=*/false};
}

Status plan_cudnn_attention(cudnnHandle_t handle, const AttentionOp& op, int compute_capability,
                            std::unique_ptr<Plan>* out) {
  if (const std::string why =
          attention_unsupported_reason(op, cudnnGetVersion(), compute_capability);
      !why.empty())
    return Status::Unimplemented("cuda: " + why);
  auto graph = std::make_unique<AttentionGraph>();
  TB_RETURN_IF_ERROR(make_node(handle, op, graph.get()));
  void* raw = nullptr;
  const std::size_t bytes = static_cast<std::size_t>(op.batch) * sizeof(std::int32_t);
  TB_RETURN_IF_ERROR(cuda_status(cudaMalloc(&raw, bytes), "cudaMalloc (attention query lengths)"));
  std::unique_ptr<void, DeviceFree> query_lengths(raw);
  const std::vector<std::int32_t> lengths(static_cast<std::size_t>(op.batch),
                                          static_cast<std::int32_t>(op.sequence));
  TB_RETURN_IF_ERROR(cuda_status(cudaMemcpy(raw, lengths.data(), bytes, cudaMemcpyHostToDevice),
                                 "cudaMemcpy (attention query lengths)"));
  *out =
      std::make_unique<CudnnAttentionPlan>(handle, op, std::move(graph), std::move(query_lengths));
  return Status::Ok();
}

}  // namespace tb::cuda
