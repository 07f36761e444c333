#include "backends/cuda/cudnn_attention.h"

#include <cuda_runtime_api.h>

#include <limits>
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
  kDiffV,
  // The backward's composite graph: two by-value constants, two fp32 tensors in the workspace
  // (before the engine's), and its virtual intermediates from kFirstVirtual on.
  kOne,
  kNegativeInfinity,
  kSoftmaxSum,
  kQueryGradientSum,
  kFirstVirtual = 100
};

// One pass's graph, the nodes it is made of and the plan made from it; every descriptor lives
// as long as the plan.
struct AttentionGraph {
  std::vector<BackendDescriptor> tensors;
  BackendDescriptor operation, graph;  // the forward's one SDPA node
  std::vector<PointwiseNode> nodes;    // the backward's pointwise, matmul and sum nodes
  std::vector<BackendDescriptor> views;
  std::vector<cudnnBackendDescriptor_t> operations;  // the backward's, in graph order
  BuiltPlan built;
};

// The forward: cuDNN's native SDPA node, as cudnn-frontend picks it on cuDNN 9.19.
Status make_forward(cudnnHandle_t handle, const AttentionOp& op, AttentionGraph* g) {
#if CUDNN_VERSION < 91700
  (void)handle, (void)op, (void)g;
  return Status::Unimplemented(fmt::format(
      "cuda: built with cuDNN {} headers, which have no SDPA operation (9.17+)", CUDNN_VERSION));
#else
  const std::int64_t b = op.batch, h = op.heads, s = op.sequence;
  struct Binding {
    cudnnBackendAttributeName_t attribute;
    TensorSpec tensor;
  };
  const TensorSpec stats{kStats, DType::f32, {b, h, s, 1}, {h * s, s, 1, 1}, false};
  const TensorSpec scale{kScale, DType::f32, {1, 1, 1, 1}, {1, 1, 1, 1}, /*by_value=*/true};
  const TensorSpec query_lengths{kQueryLengths, DType::i32, {b, 1, 1, 1}, {1, 1, 1, 1}, false};
  const TensorSpec key_lengths{kKeyLengths, DType::i32, {b, 1, 1, 1}, {1, 1, 1, 1}, false};
  auto rows = [&](Uid uid) { return interleaved_attention_tensor(uid, op); };
  const std::vector<Binding> bindings = {
      {CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, rows(kQ)},
      {CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, rows(kK)},
      {CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, rows(kV)},
      {CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, rows(kO)},
      {CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, stats},
      {CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale},
      {CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_QDESC, query_lengths},
      {CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_KVDESC, key_lengths}};
  TB_RETURN_IF_ERROR(g->operation.create(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR));
  g->tensors.resize(bindings.size());
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    TB_RETURN_IF_ERROR(make_tensor(bindings[i].tensor, &g->tensors[i]));
    TB_RETURN_IF_ERROR(g->operation.set(bindings[i].attribute, g->tensors[i]));
  }
  TB_RETURN_IF_ERROR(g->operation.finalize());
  TB_RETURN_IF_ERROR(make_operation_graph(handle, g->operation, &g->graph));

  return first_buildable_plan(handle, g->graph, /*fp32_accumulation=*/false, "SDPA forward",
                              &g->built);
#endif
}

// Adds a tensor to the graph and returns it.
const BackendDescriptor* add_tensor(const TensorSpec& spec, AttentionGraph* g, Status* status) {
  g->tensors.emplace_back();
  if (status->ok()) *status = make_tensor(spec, &g->tensors.back());
  return &g->tensors.back();
}

// One piece: the 24 nodes in cudnn-frontend's order, each tensor beside the node that makes it,
// so that the graph reads as the frontend's list (docs/backends/cuda.md).
Status make_backward_nodes(const AttentionOp& op, AttentionGraph* g) {
  const std::int64_t b = op.batch, h = op.heads, s = op.sequence, d = op.head_dim;
  const DType io = op.dtype, f32 = DType::f32;
  g->tensors.reserve(48);  // descriptors are referred to by address while the graph is built
  g->nodes.reserve(24);
  g->views.reserve(3);
  Status status = Status::Ok();
  std::int64_t next_virtual = kFirstVirtual;
  const std::vector<std::int64_t> scores = {b, h, s, s}, score_strides = {h * s * s, s * s, s, 1},
                                  transposed_strides = {h * s * s, s * s, 1, s},
                                  rows = {b, h, s, 1}, row_strides = {h * s, s, 1, 1};
  const auto tensor = [&](const TensorSpec& spec) { return add_tensor(spec, g, &status); };
  const auto virtual_tensor = [&](DType dtype, const std::vector<std::int64_t>& dims,
                                  const std::vector<std::int64_t>& strides, bool boolean = false) {
    return tensor({next_virtual++, dtype, dims, strides, false, /*is_virtual=*/true, boolean});
  };
  const auto scalar = [&](Uid uid) { return tensor({uid, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, true}); };
  // Keys and values as K^T and V^T [b, h, d, s]: the same memory, its last two dims swapped.
  const auto transposed = [&](Uid uid) {
    return tensor({uid, io, {b, h, d, s}, {s * h * d, d, 1, h * d}});
  };
  const BackendDescriptor *q = tensor(interleaved_attention_tensor(kQ, op)), *kt = transposed(kK),
                          *vt = transposed(kV), *o = tensor(interleaved_attention_tensor(kO, op)),
                          *diff_o = tensor(interleaved_attention_tensor(kDiffO, op)),
                          *stats = tensor({kStats, f32, rows, row_strides}),
                          *scale = scalar(kScale), *one = scalar(kOne),
                          *negative_infinity = scalar(kNegativeInfinity),
                          *query_lengths =
                              tensor({kQueryLengths, DType::i32, {b, 1, 1, 1}, {1, 1, 1, 1}}),
                          *key_lengths =
                              tensor({kKeyLengths, DType::i32, {b, 1, 1, 1}, {1, 1, 1, 1}});
  const auto pointwise = [&](PointwiseMath math, const BackendDescriptor* x,
                             const BackendDescriptor* bb, const BackendDescriptor* t,
                             const BackendDescriptor* y) {
    g->nodes.emplace_back();
    if (status.ok()) status = make_pointwise(math, *x, bb, t, *y, &g->nodes.back());
    g->operations.push_back(g->nodes.back().operation.get());
    return y;
  };
  const auto matmul = [&](const BackendDescriptor* a, const BackendDescriptor* bb,
                          const BackendDescriptor* c, MatmulOverrides overrides) {
    g->nodes.emplace_back();
    if (status.ok()) status = make_matmul(*a, *bb, *c, overrides, &g->nodes.back());
    g->operations.push_back(g->nodes.back().operation.get());
    return c;
  };
  const auto view = [&](const BackendDescriptor* x, const BackendDescriptor* y) {
    g->views.emplace_back();
    if (status.ok()) status = make_reshape(*x, *y, &g->views.back());
    g->operations.push_back(g->views.back().get());
    return y;
  };
  const PointwiseMath mul{CUDNN_POINTWISE_MUL}, sub{CUDNN_POINTWISE_SUB};
  // D = rowsum(dO o O), kept in the workspace (1-3).
  const BackendDescriptor* products = pointwise(
      mul, diff_o, o, nullptr, virtual_tensor(f32, {b, h, s, d}, {h * s * d, s * d, h * d, 1}));
  const BackendDescriptor* row_sums = virtual_tensor(f32, rows, row_strides);
  g->nodes.emplace_back();
  if (status.ok()) status = make_sum(*products, *row_sums, &g->nodes.back());
  g->operations.push_back(g->nodes.back().operation.get());
  const BackendDescriptor* softmax_sum =
      pointwise(mul, row_sums, one, nullptr, tensor({kSoftmaxSum, f32, rows, row_strides}));
  // P recomputed from the scores and the forward's statistics, padded keys masked (4-13).
  const BackendDescriptor* raw_scores =
      matmul(q, kt, virtual_tensor(f32, scores, score_strides), {query_lengths, key_lengths});
  const BackendDescriptor* scaled =
      pointwise(mul, raw_scores, scale, nullptr, virtual_tensor(f32, scores, score_strides));
  const auto index = [&](std::int64_t axis) {
    return pointwise({CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, axis}, scaled, nullptr, nullptr,
                     virtual_tensor(DType::i32, scores, score_strides));
  };
  const BackendDescriptor *row_index = index(2), *column_index = index(3);
  const PointwiseMath less{CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN};
  const auto mask = [&] { return virtual_tensor(f32, scores, score_strides, true); };
  const BackendDescriptor* query_kept = pointwise(less, row_index, query_lengths, nullptr, mask());
  const BackendDescriptor* key_kept = pointwise(less, column_index, key_lengths, nullptr, mask());
  const BackendDescriptor* kept = pointwise({CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN},
                                            query_kept, key_kept, nullptr, mask());
  const BackendDescriptor* masked =
      pointwise({CUDNN_POINTWISE_BINARY_SELECT}, scaled, negative_infinity, kept,
                virtual_tensor(f32, scores, score_strides));
  const BackendDescriptor* centred =
      pointwise(sub, masked, stats, nullptr, virtual_tensor(f32, scores, score_strides));
  const BackendDescriptor* p = pointwise({CUDNN_POINTWISE_EXP}, centred, nullptr, nullptr,
                                         virtual_tensor(f32, scores, score_strides));
  // dV = P^T dO (14-15).
  const BackendDescriptor* p_transposed = view(p, virtual_tensor(io, scores, transposed_strides));
  matmul(p_transposed, diff_o, tensor(interleaved_attention_tensor(kDiffV, op)),
         {.m = key_lengths, .k = query_lengths});
  // dS = P o (dO V^T - D) x scale (16-19).
  const BackendDescriptor* diff_p =
      matmul(diff_o, vt, virtual_tensor(f32, scores, score_strides), {query_lengths, key_lengths});
  const BackendDescriptor* centred_diff =
      pointwise(sub, diff_p, softmax_sum, nullptr, virtual_tensor(f32, scores, score_strides));
  const BackendDescriptor* weighted =
      pointwise(mul, centred_diff, p, nullptr, virtual_tensor(f32, scores, score_strides));
  const BackendDescriptor* diff_s =
      pointwise(mul, weighted, scale, nullptr, virtual_tensor(f32, scores, score_strides));
  // dK = dS^T Q (20-21); dQ = dS K through an fp32 accumulator in the workspace (22-24).
  const BackendDescriptor* diff_s_transposed =
      view(diff_s, virtual_tensor(io, scores, transposed_strides));
  matmul(diff_s_transposed, q, tensor(interleaved_attention_tensor(kDiffK, op)),
         {.m = key_lengths, .k = query_lengths});
  // The frontend types this view of K fp32 (its fill rule for an unset dtype): copied as it is.
  const BackendDescriptor* k =
      view(kt, virtual_tensor(f32, {b, h, s, d}, {s * h * d, d, h * d, 1}));
  const BackendDescriptor* accumulated =
      matmul(diff_s, k, tensor({kQueryGradientSum, f32, {b, h, s, d}, {h * s * d, s * d, d, 1}}),
             {.m = query_lengths, .k = key_lengths});
  pointwise({CUDNN_POINTWISE_IDENTITY}, accumulated, nullptr, nullptr,
            tensor(interleaved_attention_tensor(kDiffQ, op)));
  return status;
}

Status make_node(cudnnHandle_t handle, const AttentionOp& op, AttentionGraph* g) {
  if (op.pass == Pass::forward) return make_forward(handle, op, g);
  TB_RETURN_IF_ERROR(make_backward_nodes(op, g));
  TB_RETURN_IF_ERROR(make_operation_graph(handle, g->operations, &g->graph));
  return first_buildable_plan(handle, g->graph, /*fp32_accumulation=*/false,
                              "SDPA backward (cudnn-frontend's composite graph)", &g->built);
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
    if (op.pass == Pass::backward) layout_ = attention_backward_workspace(op);
    workspace_bytes_ = layout_.engine_offset + static_cast<std::size_t>(graph_->built.workspace);
    implementation_ = fmt::format(
        "cuDNN scaled dot-product attention {} ({}, cuDNN {}), engine {} ({}), workspace {} B",
        op.pass == Pass::forward ? "forward" : "backward",
        op.pass == Pass::forward ? "the graph API's SDPA operation"
                                 : "cudnn-frontend's composite graph of 24 nodes",
        cudnn_runtime_version(), graph_->built.engine.global_index,
        graph_->built.engine.notes.describe(), workspace_bytes_);
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
    // The fp32 dQ accumulator and D = rowsum(dO o O) come first in the workspace, then the
    // engine's; the constants go by value.
    char* const base = static_cast<char*>(workspace.data);
    void* const one = &one_;
    void* const negative_infinity = &negative_infinity_;
    const std::int64_t ids[] = {kQ,          kK,
                                kV,          kKeyLengths,
                                kO,          kStats,
                                kDiffO,      kDiffQ,
                                kDiffK,      kDiffV,
                                kScale,      kQueryLengths,
                                kOne,        kNegativeInfinity,
                                kSoftmaxSum, kQueryGradientSum};
    void* const pointers[] = {data("q"),
                              data("k"),
                              data("v"),
                              data("key_lengths"),
                              data("out"),
                              data("stats"),
                              data("diff_out"),
                              data("diff_q"),
                              data("diff_k"),
                              data("diff_v"),
                              scale,
                              query_lengths,
                              one,
                              negative_infinity,
                              base + layout_.softmax_sum_offset,
                              base};
    return execute_plan(handle_, graph_->built.plan, ids, pointers, base + layout_.engine_offset);
  }

 private:
  cudnnHandle_t handle_;
  AttentionOp op_;
  std::unique_ptr<AttentionGraph> graph_;
  std::unique_ptr<void, DeviceFree> query_lengths_;
  float scale_;  // handed over by value at every execution, as are the next two
  float one_ = 1.0f, negative_infinity_ = -std::numeric_limits<float>::infinity();
  AttentionWorkspace layout_;  // the backward's; all zero for the forward
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

AttentionWorkspace attention_backward_workspace(const AttentionOp& op) {
  AttentionWorkspace w;
  const std::size_t rows = static_cast<std::size_t>(op.batch * op.heads * op.sequence);
  w.softmax_sum_offset = workspace_aligned(rows * static_cast<std::size_t>(op.head_dim) * 4);
  w.engine_offset = w.softmax_sum_offset + workspace_aligned(rows * 4);
  return w;
}

Status finalize_backward_nodes(const AttentionOp& op, std::size_t* count) {
  AttentionGraph graph;
  TB_RETURN_IF_ERROR(make_backward_nodes(op, &graph));
  *count = graph.operations.size();
  return Status::Ok();
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
  // Each pass is planned alone: a refusal names its pass.
  if (const Status planned = make_node(handle, op, graph.get()); !planned.ok())
    return planned.with_prefix(fmt::format("cuda: fused attention {}: ",
                                           op.pass == Pass::forward ? "forward" : "backward"));
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
