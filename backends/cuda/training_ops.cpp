#include "backends/cuda/training_ops.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "backends/cuda/cublaslt_gemm.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/nhwc.h"
#include "backends/cuda/training_kernels.h"
#include "backends/operands.h"

namespace tb::cuda {
namespace {

// A plan whose work is a sequence of kernel launches on the operand buffers.
class KernelPlan final : public CudaPlan {
 public:
  using Launch = std::function<cudaError_t(const BoundOperands&, void* scratch, cudaStream_t)>;
  // `channels_last`: the 4-D operands are stored NHWC (batch norm and pooling on 16-bit data).
  KernelPlan(std::vector<OperandSpec> operands, std::size_t scratch_bytes, std::string_view what,
             DType dtype, Launch launch, bool channels_last = false)
      : launch_(std::move(launch)) {
    operands_ = std::move(operands);
    channels_last_ = channels_last;
    workspace_bytes_ = scratch_bytes;
    implementation_ = fmt::format("trainbench CUDA kernels: {} ({})", what, dtype_name(dtype));
    math_mode_ = "fp32 arithmetic";
    empty_ = std::any_of(operands_.begin(), operands_.end(),
                         [](const OperandSpec& operand) { return operand.elements() == 0; });
  }
  Status run(std::span<const Buffer> operands, Buffer workspace, cudaStream_t stream) override {
    if (empty_) return Status::Ok();  // an empty grid is a launch error
    return cuda_status(launch_(BoundOperands(operands_, operands), workspace.data, stream),
                       implementation_.c_str());
  }

 private:
  Launch launch_;
  bool empty_ = false;  // some operand has no elements: nothing to compute
};

// An operand's memory, or null where the op does not declare it: the launches take raw
// pointers, read or written as their pass says.
template <typename T = void>
T* data_if(const BoundOperands& b, std::string_view name) {
  return b.has(name) ? static_cast<T*>(b.buffer(name).data) : nullptr;
}

// Buffers for `plan`'s operands (a plan run inside another), by the names it declares.
std::vector<Buffer> by_name(const Plan& plan,
                            std::initializer_list<std::pair<std::string_view, Buffer>> named) {
  std::vector<Buffer> buffers(plan.operands().size());
  for (const auto& [name, buffer] : named)
    buffers[static_cast<std::size_t>(operand_index(plan.operands(), name))] = buffer;
  if (named.size() != buffers.size())
    throw std::logic_error(fmt::format("{} buffers named for {} operands of the inner plan",
                                       named.size(), buffers.size()));
  return buffers;
}

// Fully connected layers as GEMMs on the row-major operands (y = x W^T + b; dx = dy W;
// dW = dy^T x). The bias and its gradient come from cuBLASLt's epilogue where it has an
// algorithm for it, else from own kernels after the GEMM.
class FullyConnectedPlan final : public CudaPlan {
 public:
  FullyConnectedPlan(const FullyConnectedOp& op, std::unique_ptr<Plan> gemm, LtEpilogue epilogue)
      : op_(op), gemm_(std::move(gemm)), fused_(epilogue != LtEpilogue::none) {
    operands_ = fully_connected_operands(op);
    const bool own_bias_gradient = !fused_ && op.direction == ConvDirection::backward_weights;
    // The GEMM and the bias kernels run one after the other on one stream: they share it.
    workspace_bytes_ =
        std::max(gemm_->workspace_bytes(),
                 own_bias_gradient ? column_sums_scratch_bytes(op.out) : std::size_t{0});
    implementation_ =
        gemm_->implementation() +
        (op.direction == ConvDirection::backward_data || fused_ ? "" : " + trainbench bias kernel");
    math_mode_ = gemm_->math_mode();
  }
  Status run(std::span<const Buffer> operands, Buffer workspace, cudaStream_t stream) override {
    auto& gemm = static_cast<CudaPlan&>(*gemm_);
    const BoundOperands b(operands_, operands);
    switch (op_.direction) {
      case ConvDirection::forward: {  // dst = src weights^T (+ bias)
        const Buffer src = b.buffer("src"), weights = b.buffer("weights"), bias = b.buffer("bias"),
                     dst = b.output_buffer("dst");
        if (fused_)
          return gemm.run(by_name(gemm, {{"a", src}, {"b", weights}, {"c", dst}, {"bias", bias}}),
                          workspace, stream);
        TB_RETURN_IF_ERROR(
            gemm.run(by_name(gemm, {{"a", src}, {"b", weights}, {"c", dst}}), workspace, stream));
        return cuda_status(launch_add_bias(op_.dtype, op_.mb * op_.out, op_.out, 1, false,
                                           bias.data, dst.data, stream),
                           "bias");
      }
      case ConvDirection::backward_data:  // diff_src = diff_dst weights
        return gemm.run(by_name(gemm, {{"a", b.buffer("diff_dst")},
                                       {"b", b.buffer("weights")},
                                       {"c", b.output_buffer("diff_src")}}),
                        workspace, stream);
      case ConvDirection::backward_weights: {  // diff_weights = diff_dst^T src (+ diff_bias)
        const Buffer src = b.buffer("src"), diff_dst = b.buffer("diff_dst"),
                     diff_weights = b.output_buffer("diff_weights"),
                     diff_bias = b.output_buffer("diff_bias");
        if (fused_)
          return gemm.run(
              by_name(gemm,
                      {{"a", diff_dst}, {"b", src}, {"c", diff_weights}, {"diff_bias", diff_bias}}),
              workspace, stream);
        TB_RETURN_IF_ERROR(gemm.run(
            by_name(gemm, {{"a", diff_dst}, {"b", src}, {"c", diff_weights}}), workspace, stream));
        return cuda_status(
            launch_bias_gradient(op_.dtype, op_.mb, op_.out, diff_dst.data,
                                 static_cast<float*>(diff_bias.data), workspace.data, stream),
            "bias gradient");
      }
    }
    return Status::Ok();
  }

 private:
  FullyConnectedOp op_;
  std::unique_ptr<Plan> gemm_;
  bool fused_;  // the bias (gradient) is the GEMM's epilogue
};

Status plan_fully_connected(cublasLtHandle_t handle, const FullyConnectedOp& op,
                            std::unique_ptr<Plan>* out) {
  const GemmOp gemm = fully_connected_gemm(op);
  LtEpilogue epilogue = op.direction == ConvDirection::forward ? LtEpilogue::bias
                        : op.direction == ConvDirection::backward_weights
                            ? LtEpilogue::bias_gradient
                            : LtEpilogue::none;
  std::unique_ptr<Plan> plan;
  Status status = plan_cublaslt_gemm(handle, gemm, &plan, 0, epilogue);
  if (!status.ok() && epilogue != LtEpilogue::none) {
    epilogue = LtEpilogue::none;  // cuBLASLt refused the epilogue: own bias kernels
    status = plan_cublaslt_gemm(handle, gemm, &plan, 0, epilogue);
  }
  TB_RETURN_IF_ERROR(status);
  *out = std::make_unique<FullyConnectedPlan>(op, std::move(plan), epilogue);
  return Status::Ok();
}

Status unsupported_dtype(std::string_view what, DType dtype) {
  return Status::Unimplemented(
      fmt::format("cuda: {} runs on f32, bf16 and f16 data, not {}", what, dtype_name(dtype)));
}

BatchNormBuffers batch_norm_buffers(const BoundOperands& b) {
  BatchNormBuffers buffers;
  buffers.src = data_if(b, "src");
  buffers.diff_dst = data_if(b, "diff_dst");
  buffers.gamma = data_if<float>(b, "gamma");
  buffers.beta = data_if<float>(b, "beta");
  buffers.mean = data_if<float>(b, "mean");
  buffers.variance = data_if<float>(b, "variance");
  buffers.running_mean = data_if<float>(b, "running_mean");
  buffers.running_var = data_if<float>(b, "running_var");
  buffers.relu_mask = data_if<std::int32_t>(b, "relu_mask");
  buffers.dst = data_if(b, "dst");
  buffers.diff_src = data_if(b, "diff_src");
  buffers.diff_gamma = data_if<float>(b, "diff_gamma");
  buffers.diff_beta = data_if<float>(b, "diff_beta");
  return buffers;
}

PoolBuffers pool_buffers(const BoundOperands& b) {
  return {data_if(b, "src"), data_if(b, "diff_dst"), data_if<std::int32_t>(b, "indices"),
          data_if(b, "dst"), data_if(b, "diff_src")};
}

// One plan() per op the own kernels (and cuBLASLt's fully connected layer) run; the ops with a
// data dtype check it first.
class TrainingPlanner {
 public:
  TrainingPlanner(cublasLtHandle_t handle, const OpDesc& desc, std::unique_ptr<Plan>* out)
      : handle_(handle), desc_(desc), out_(out) {}

  Status plan(const CastOp& o) const {
    if (!kernel_dtype(o.from) || !kernel_dtype(o.to))
      return Status::Unimplemented(
          fmt::format("cuda: no cast from {} to {}", dtype_name(o.from), dtype_name(o.to)));
    *out_ = std::make_unique<KernelPlan>(
        cast_operands(o), 0, fmt::format("cast to {}", dtype_name(o.to)), o.from,
        [o](const BoundOperands& b, void*, cudaStream_t s) {
          return launch_cast(o, b.in<void>("src"), b.out<void>("dst"), s);
        });
    return Status::Ok();
  }
  Status plan(const UnscaleGradientsOp& o) const {
    if (o.dtype != DType::f32)
      return Status::Unimplemented(
          fmt::format("cuda: gradients are f32 (master), not {}", dtype_name(o.dtype)));
    *out_ = std::make_unique<KernelPlan>(
        unscale_gradients_operands(o), 0, "gradient unscale and finite check", o.dtype,
        [o](const BoundOperands& b, void*, cudaStream_t s) {
          return launch_unscale_gradients(o, b.out<void>("grads"), *b.in<float>("inverse_scale"),
                                          b.out<std::int32_t>("found_nonfinite"), s);
        });
    return Status::Ok();
  }
  Status plan(const OptimizerOp& o) const {
    if (o.kind == OptimizerKind::lamb && o.count > std::numeric_limits<std::int32_t>::max())
      return Status::Unimplemented("LAMB's tensor offsets are i32: at most 2^31 - 1 parameters");
    if (o.dtype != DType::f32)
      return Status::Unimplemented(
          fmt::format("cuda: optimizer state is f32, not {}", dtype_name(o.dtype)));
    static constexpr const char* kNames[] = {"SGD with momentum", "AdamW", "LAMB"};
    *out_ = std::make_unique<KernelPlan>(
        optimizer_operands(o), optimizer_scratch_bytes(o), kNames[static_cast<int>(o.kind)],
        o.dtype, [o](const BoundOperands& b, void* scratch, cudaStream_t s) {
          const bool sgd = o.kind == OptimizerKind::sgd_momentum;
          // SGD's momentum goes where Adam's m does; the hyperparameters live on the host.
          return launch_optimizer(o, b.out<float>("weights"), b.in<float>("grads"),
                                  b.out<float>(sgd ? "momentum" : "m"), data_if<float>(b, "v"),
                                  data_if<std::int32_t>(b, "tensor_offsets"), b.in<float>("hyper"),
                                  scratch, s);
        });
    return Status::Ok();
  }
  Status plan(const FullyConnectedOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    return plan_fully_connected(handle_, o, out_);
  }
  Status plan(const EltwiseOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    static constexpr const char* kNames[] = {"ReLU", "GELU (erf)", "tanh"};
    return kernels(eltwise_operands(o), 0, kNames[static_cast<int>(o.kind)],
                   [o](const BoundOperands& b, void*, cudaStream_t s) {
                     // Backward reads the forward's output (ReLU, tanh) or input (GELU).
                     const bool forward = o.pass == Pass::forward;
                     const void* first = b.has("src") ? b.in<void>("src") : b.in<void>("dst");
                     return launch_eltwise(o, first, b.in_if<void>("diff_dst"),
                                           b.out<void>(forward ? "dst" : "diff_src"), s);
                   });
  }
  Status plan(const BinaryOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    return kernels(binary_operands(o), 0, o.fuse_relu ? "add + ReLU" : "add",
                   [o](const BoundOperands& b, void*, cudaStream_t s) {
                     return launch_add(o, b.in<void>("src0"), b.in<void>("src1"),
                                       b.out<void>("dst"), s);
                   });
  }
  Status plan(const DropoutOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    if (!(o.probability >= 0 && o.probability < 1))
      return Status::InvalidArgument("dropout probability must be in [0, 1)");
    return kernels(dropout_operands(o), 0, "dropout (counter-based mask, not stored)",
                   [o](const BoundOperands& b, void*, cudaStream_t s) {
                     // The step lives in host memory: read when the kernel is launched.
                     const bool forward = o.pass == Pass::forward;
                     return launch_dropout(o, b.in<void>(forward ? "src" : "diff_dst"),
                                           *b.in<std::int32_t>("step"),
                                           b.out<void>(forward ? "dst" : "diff_src"), s);
                   });
  }
  Status plan(const LayerNormOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    return kernels(layer_norm_operands(o), layer_norm_scratch_bytes(o), "layer norm",
                   [o](const BoundOperands& b, void* scratch, cudaStream_t s) {
                     if (o.pass == Pass::forward)
                       return launch_layer_norm_forward(
                           o, b.in<void>("src"), b.in<float>("gamma"), b.in<float>("beta"),
                           b.out<void>("dst"), b.out<float>("mean"), b.out<float>("variance"), s);
                     return launch_layer_norm_backward(
                         o, b.in<void>("src"), b.in<void>("diff_dst"), b.in<float>("gamma"),
                         b.in<float>("mean"), b.in<float>("variance"), b.out<void>("diff_src"),
                         b.out<float>("diff_gamma"), b.out<float>("diff_beta"), scratch, s);
                   });
  }
  Status plan(const RmsNormOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    TB_RETURN_IF_ERROR(check_rms_norm(o));
    return kernels(rms_norm_operands(o), rms_norm_scratch_bytes(o), "RMSNorm",
                   [o](const BoundOperands& b, void* scratch, cudaStream_t s) {
                     if (o.pass == Pass::forward)
                       return launch_rms_norm_forward(o, b.in<void>("src"), b.in<float>("gamma"),
                                                      b.out<void>("dst"),
                                                      b.out<float>("inverse_rms"), s);
                     return launch_rms_norm_backward(
                         o, b.in<void>("src"), b.in<void>("diff_dst"), b.in<float>("gamma"),
                         b.in<float>("inverse_rms"), b.out<void>("diff_src"),
                         b.out<float>("diff_gamma"), scratch, s);
                   });
  }
  Status plan(const SoftmaxOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    if (o.rows_per_mask < 1 || o.rows % o.rows_per_mask != 0)
      return Status::InvalidArgument("softmax: rows must be a multiple of rows_per_mask");
    return kernels(softmax_operands(o), 0, o.masked ? "scaled masked softmax" : "scaled softmax",
                   [o](const BoundOperands& b, void*, cudaStream_t s) {
                     if (o.pass == Pass::backward)
                       return launch_softmax_backward(o, b.in<void>("dst"), b.in<void>("diff_dst"),
                                                      b.out<void>("diff_src"), s);
                     return launch_softmax_forward(o, b.in<void>("src"), b.in_if<float>("mask"),
                                                   b.out<void>("dst"), s);
                   });
  }
  Status plan(const SoftmaxCrossEntropyOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    return kernels(softmax_cross_entropy_operands(o), softmax_cross_entropy_scratch_bytes(o),
                   "softmax cross-entropy",
                   [o](const BoundOperands& b, void* scratch, cudaStream_t s) {
                     if (o.pass == Pass::forward)
                       return launch_softmax_cross_entropy_forward(
                           o, b.in<void>("logits"), b.in<std::int32_t>("labels"),
                           b.out<void>("probabilities"), b.out<void>("loss"), scratch, s);
                     // The loss scale lives in host memory: read when the kernel is launched.
                     const float loss_scale = o.scaled ? *b.in<float>("scale") : 1.0f;
                     return launch_softmax_cross_entropy_backward(
                         o, b.in<void>("probabilities"), b.in<std::int32_t>("labels"), loss_scale,
                         b.out<void>("diff_logits"), s);
                   });
  }
  Status plan(const EmbeddingOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    return kernels(
        embedding_operands(o), 0,
        o.pass == Pass::forward ? "row gather" : "row scatter-add (atomic)",
        [o](const BoundOperands& b, void*, cudaStream_t s) {
          if (o.pass == Pass::forward)
            return launch_embedding_forward(o, b.in<void>("table"), b.in<std::int32_t>("ids"),
                                            b.out<void>("dst"), s);
          return launch_embedding_backward(o, b.in<void>("diff_dst"), b.in<std::int32_t>("ids"),
                                           b.out<void>("diff_table"), s);
        });
  }
  Status plan(const BatchNormOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    const bool nhwc = channels_last(o.dtype, o.layout);
    return kernels(
        batch_norm_operands(o), batch_norm_scratch_bytes(o),
        fmt::format("batch norm{} ({})", o.fuse_relu ? " + ReLU" : "", nhwc ? "NHWC" : "NCHW"),
        [o](const BoundOperands& b, void* scratch, cudaStream_t s) {
          return launch_batch_norm(o, batch_norm_buffers(b), scratch, s);
        },
        nhwc);
  }
  Status plan(const PoolOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    const bool nhwc = channels_last(o.dtype, o.layout);
    return kernels(
        pool_operands(o), 0,
        fmt::format("{} pooling ({})", o.kind == PoolKind::max ? "max" : "global average",
                    nhwc ? "NHWC" : "NCHW"),
        [o](const BoundOperands& b, void*, cudaStream_t s) {
          return launch_pool(o, pool_buffers(b), s);
        },
        nhwc);
  }
  // GEMM, convolution, attention and the benchmark ops are the backend's own.
  Status plan(const auto&) const {
    const std::optional<DType> dtype = data_type(desc_);
    if (dtype) TB_RETURN_IF_ERROR(check_data(*dtype));
    return Status::Unimplemented(fmt::format("cuda: op '{}' is not implemented", op_name(desc_)));
  }

 private:
  Status check_data(DType dtype) const {
    if (!kernel_dtype(storage_dtype(dtype))) return unsupported_dtype(op_name(desc_), dtype);
    return Status::Ok();
  }
  // A plan of own kernels on the op's data dtype.
  Status kernels(std::vector<OperandSpec> operands, std::size_t scratch, std::string_view what,
                 KernelPlan::Launch launch, bool channels_last = false) const {
    *out_ = std::make_unique<KernelPlan>(std::move(operands), scratch, what, *data_type(desc_),
                                         std::move(launch), channels_last);
    return Status::Ok();
  }

  cublasLtHandle_t handle_;
  const OpDesc& desc_;
  std::unique_ptr<Plan>* out_;
};

}  // namespace

Status plan_training_op(cublasLtHandle_t handle, const OpDesc& desc, std::unique_ptr<Plan>* out) {
  const TrainingPlanner planner(handle, desc, out);
  return std::visit([&](const auto& op) { return planner.plan(op); }, desc);
}

}  // namespace tb::cuda
