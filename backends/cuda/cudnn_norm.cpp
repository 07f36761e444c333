#include "backends/cuda/cudnn_norm.h"

#include <cuda_runtime_api.h>

#include <array>
#include <vector>

#include <fmt/format.h>

#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/cudnn_graph.h"
#include "backends/cuda/nhwc.h"
#include "backends/cuda/training_kernels.h"
#include "backends/operands.h"

namespace tb::cuda {
namespace {

// Tensor ids in the graphs and the variant packs.
enum Uid : std::int64_t {
  kX = 1,
  kY,
  kScale,
  kBias,
  kMean,
  kInverseStd,
  kPreviousMean,
  kPreviousVariance,
  kNextMean,
  kNextVariance,
  kEpsilon,
  kMomentum,
  kDiffY,
  kDiffX,
  kDiffScale,
  kDiffBias
};

// One normalization node, its graph and the plan made from it; the tensors live as long as the
// node.
struct NormGraph {
  std::vector<BackendDescriptor> tensors;
  BackendDescriptor operation, graph;
  BuiltPlan built;
};

Status make_node(cudnnHandle_t handle, const BatchNormOp& op, NormGraph* g) {
  const std::int64_t n = op.mb, c = op.channels, h = op.h, w = op.w;
  const bool forward = op.pass == Pass::forward;
  // Data NHWC; per-channel tensors [1, c, 1, 1]; epsilon and momentum host scalars.
  auto data = [&](Uid uid) {
    return TensorSpec{uid, op.dtype, {n, c, h, w}, {h * w * c, 1, w * c, c}, false};
  };
  auto channel = [&](Uid uid) {
    return TensorSpec{uid, DType::f32, {1, c, 1, 1}, {c, 1, c, c}, false};
  };
  auto scalar = [](Uid uid) {
    return TensorSpec{uid, DType::f32, {1, 1, 1, 1}, {1, 1, 1, 1}, /*by_value=*/true};
  };
  struct Binding {
    cudnnBackendAttributeName_t attribute;
    TensorSpec tensor;
  };
  const std::vector<Binding> bindings =
      forward ? std::vector<Binding>{{CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, data(kX)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC, channel(kMean)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC,
                                      channel(kInverseStd)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC, channel(kScale)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC, channel(kBias)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC, scalar(kEpsilon)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_EXP_AVG_FACTOR_DESC,
                                      scalar(kMomentum)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_INPUT_RUNNING_MEAN_DESC,
                                      channel(kPreviousMean)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_INPUT_RUNNING_VAR_DESC,
                                      channel(kPreviousVariance)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_OUTPUT_RUNNING_MEAN_DESC,
                                      channel(kNextMean)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_OUTPUT_RUNNING_VAR_DESC,
                                      channel(kNextVariance)},
                                     {CUDNN_ATTR_OPERATION_NORM_FWD_YDESC, data(kY)}}
              : std::vector<Binding>{
                    {CUDNN_ATTR_OPERATION_NORM_BWD_XDESC, data(kX)},
                    {CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC, data(kDiffY)},
                    {CUDNN_ATTR_OPERATION_NORM_BWD_SCALE_DESC, channel(kScale)},
                    {CUDNN_ATTR_OPERATION_NORM_BWD_MEAN_DESC, channel(kMean)},
                    {CUDNN_ATTR_OPERATION_NORM_BWD_INV_VARIANCE_DESC, channel(kInverseStd)},
                    {CUDNN_ATTR_OPERATION_NORM_BWD_DSCALE_DESC, channel(kDiffScale)},
                    {CUDNN_ATTR_OPERATION_NORM_BWD_DBIAS_DESC, channel(kDiffBias)},
                    {CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC, data(kDiffX)}};
  BackendDescriptor& o = g->operation;
  TB_RETURN_IF_ERROR(o.create(forward ? CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR
                                      : CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR));
  const cudnnBackendNormMode_t mode = CUDNN_BATCH_NORM;
  TB_RETURN_IF_ERROR(
      o.set(forward ? CUDNN_ATTR_OPERATION_NORM_FWD_MODE : CUDNN_ATTR_OPERATION_NORM_BWD_MODE,
            CUDNN_TYPE_NORM_MODE, 1, &mode));
  if (forward) {
    const cudnnBackendNormFwdPhase_t phase = CUDNN_NORM_FWD_TRAINING;
    TB_RETURN_IF_ERROR(
        o.set(CUDNN_ATTR_OPERATION_NORM_FWD_PHASE, CUDNN_TYPE_NORM_FWD_PHASE, 1, &phase));
  }
  g->tensors.resize(bindings.size());
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    TB_RETURN_IF_ERROR(make_tensor(bindings[i].tensor, &g->tensors[i]));
    TB_RETURN_IF_ERROR(o.set(bindings[i].attribute, g->tensors[i]));
  }
  TB_RETURN_IF_ERROR(o.finalize());
  TB_RETURN_IF_ERROR(make_operation_graph(handle, o, &g->graph));
  return first_buildable_plan(handle, g->graph, /*fp32_accumulation=*/true, "batch-norm",
                              &g->built);
}

class CudnnBatchNormPlan final : public CudaPlan {
 public:
  CudnnBatchNormPlan(cudnnHandle_t handle, const BatchNormOp& op,
                     std::shared_ptr<const NormGraph> graph)
      : handle_(handle),
        op_(op),
        graph_(std::move(graph)),
        epsilon_(op.epsilon),
        momentum_(op.momentum) {
    operands_ = batch_norm_operands(op);
    channels_last_ = true;  // cuDNN's batch norm is tried on channels-last data only
    const std::size_t channel_bytes =
        workspace_aligned(static_cast<std::size_t>(op.channels) * sizeof(float));
    const std::size_t data_bytes = operands_[operand_index(operands_, "src")].bytes;
    // After cuDNN's workspace: forward, the previous running statistics (cuDNN reads them from
    // other tensors than it writes); backward, the inverse standard deviations and, with the
    // ReLU, the gradient through its mask.
    engine_bytes_ = workspace_aligned(static_cast<std::size_t>(graph_->built.workspace));
    workspace_bytes_ = engine_bytes_ + (op.pass == Pass::forward
                                            ? 2 * channel_bytes
                                            : channel_bytes + (op.fuse_relu ? data_bytes : 0));
    channel_bytes_ = channel_bytes;
    implementation_ = fmt::format(
        "cuDNN batch norm {} (graph API normalization node, cuDNN {}), engine {} ({}), NHWC, "
        "workspace {} B{}",
        op.pass == Pass::forward ? "forward" : "backward", cudnn_runtime_version(),
        graph_->built.engine.global_index, graph_->built.engine.notes.describe(),
        graph_->built.workspace, op.fuse_relu ? ", ReLU and its mask by a trainbench kernel" : "");
    math_mode_ = fmt::format("{} data, fp32 statistics", dtype_name(op.dtype));
  }

  Status run(std::span<const Buffer> operands, Buffer workspace, cudaStream_t stream) override {
    TB_CUDNN(cudnnSetStream(handle_, stream));  // the kernels around it run on the same stream
    const BoundOperands b(operands_, operands);
    auto data = [&](std::string_view name) { return b.buffer(name).data; };
    char* const extra = static_cast<char*>(workspace.data) + engine_bytes_;
    const std::int64_t count = op_.mb * op_.channels * op_.h * op_.w;
    void* const epsilon = &epsilon_;
    if (op_.pass == Pass::forward) {
      void* const previous_mean = extra;
      void* const previous_variance = extra + channel_bytes_;
      for (auto [to, from] : {std::array<void*, 2>{previous_mean, data("running_mean")},
                              std::array<void*, 2>{previous_variance, data("running_var")}})
        TB_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(to, from, b.spec("running_mean").bytes,
                                                       cudaMemcpyDeviceToDevice, stream),
                                       "copying the running statistics"));
      void* const momentum = &momentum_;
      const std::int64_t ids[] = {kX,        kScale,        kBias,         kY,
                                  kMean,     kInverseStd,   kPreviousMean, kPreviousVariance,
                                  kNextMean, kNextVariance, kEpsilon,      kMomentum};
      void* const pointers[] = {data("src"),         data("gamma"),     data("beta"),
                                data("dst"),         data("mean"),      data("variance"),
                                previous_mean,       previous_variance, data("running_mean"),
                                data("running_var"), epsilon,           momentum};
      TB_RETURN_IF_ERROR(execute_plan(handle_, graph_->built.plan, ids, pointers, workspace.data));
      TB_RETURN_IF_ERROR(
          cuda_status(launch_variance_from_inverse_std(op_.channels, b.out<float>("variance"),
                                                       op_.epsilon, stream),
                      "batch variance"));
      if (!op_.fuse_relu) return Status::Ok();
      return cuda_status(launch_relu_with_mask(op_.dtype, count, data("dst"),
                                               b.out<std::int32_t>("relu_mask"), stream),
                         "batch norm's ReLU");
    }
    float* const inverse = reinterpret_cast<float*>(extra);
    TB_RETURN_IF_ERROR(cuda_status(
        launch_inverse_std(op_.channels, b.in<float>("variance"), op_.epsilon, inverse, stream),
        "inverse standard deviation"));
    void* diff_y = data("diff_dst");
    if (op_.fuse_relu) {
      diff_y = extra + channel_bytes_;
      TB_RETURN_IF_ERROR(
          cuda_status(launch_masked_gradient(op_.dtype, count, data("diff_dst"),
                                             b.in<std::int32_t>("relu_mask"), diff_y, stream),
                      "gradient through batch norm's ReLU"));
    }
    const std::int64_t ids[] = {kX,          kDiffY, kScale,     kMean,
                                kInverseStd, kDiffX, kDiffScale, kDiffBias};
    void* const pointers[] = {data("src"), diff_y,           data("gamma"),      data("mean"),
                              inverse,     data("diff_src"), data("diff_gamma"), data("diff_beta")};
    return execute_plan(handle_, graph_->built.plan, ids, pointers, workspace.data);
  }

 private:
  cudnnHandle_t handle_;
  BatchNormOp op_;
  std::shared_ptr<const NormGraph> graph_;  // shared with the cache and its shape's other plans
  std::size_t engine_bytes_ = 0, channel_bytes_ = 0;
  float epsilon_, momentum_;  // handed over by value at every execution
};

}  // namespace

std::string cudnn_batch_norm_skip_reason(const BatchNormOp& op) {
  if (op.inference) return "inference is a per-channel affine map: the own kernel";
  if (!channels_last(op.dtype, op.layout))
    return "cuDNN's batch-norm engines take channels-last 16-bit data";
  return "";
}

struct NormGraphEntry {
  std::shared_ptr<const NormGraph> graph;  // null where no engine builds a plan
  Status status;                           // why not
};

std::string batch_norm_graph_key(const BatchNormOp& op) {
  return fmt::format("{} {} n{} c{} {}x{}", op.pass == Pass::forward ? "forward" : "backward",
                     dtype_name(op.dtype), op.mb, op.channels, op.h, op.w);
}

Status plan_cudnn_batch_norm(cudnnHandle_t handle, NormGraphCache& cache, const BatchNormOp& op,
                             std::unique_ptr<Plan>* out) {
  if (const std::string why = cudnn_batch_norm_skip_reason(op); !why.empty())
    return Status::Unimplemented("cuda: " + why);
  const std::string key = batch_norm_graph_key(op);
  std::shared_ptr<const NormGraphEntry> entry = cache.find(key);
  if (!entry) {
    auto graph = std::make_shared<NormGraph>();
    auto built = std::make_shared<NormGraphEntry>();
    built->status = make_node(handle, op, graph.get());
    if (built->status.ok()) built->graph = std::move(graph);
    cache.insert(key, built);
    entry = std::move(built);
  }
  TB_RETURN_IF_ERROR(entry->status);
  *out = std::make_unique<CudnnBatchNormPlan>(handle, op, entry->graph);
  return Status::Ok();
}

}  // namespace tb::cuda
