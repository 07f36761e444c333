#include "backends/cuda/training_ops.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
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
  using Launch = std::function<cudaError_t(std::span<const Buffer>, void* scratch, cudaStream_t)>;
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
    return cuda_status(launch_(operands, workspace.data, stream), implementation_.c_str());
  }

 private:
  Launch launch_;
  bool empty_ = false;  // some operand has no elements: nothing to compute
};

constexpr std::size_t kMaxOperands = 12;  // batch norm's backward with its ReLU mask has 10

template <typename T>
T* as(const Buffer& buffer) {
  return static_cast<T*>(buffer.data);
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
  Status run(std::span<const Buffer> b, Buffer workspace, cudaStream_t stream) override {
    auto& gemm = static_cast<CudaPlan&>(*gemm_);
    switch (op_.direction) {
      case ConvDirection::forward: {  // src, weights, bias, dst
        if (fused_) {
          const Buffer gemm_operands[] = {b[0], b[1], b[3], b[2]};
          return gemm.run(gemm_operands, workspace, stream);
        }
        const Buffer gemm_operands[] = {b[0], b[1], b[3]};
        TB_RETURN_IF_ERROR(gemm.run(gemm_operands, workspace, stream));
        return cuda_status(launch_add_bias(op_.dtype, op_.mb * op_.out, op_.out, 1, false,
                                           b[2].data, b[3].data, stream),
                           "bias");
      }
      case ConvDirection::backward_data:  // diff_dst, weights, diff_src
        return gemm.run(b, workspace, stream);
      case ConvDirection::backward_weights: {  // src, diff_dst, diff_weights, diff_bias
        if (fused_) {
          const Buffer gemm_operands[] = {b[1], b[0], b[2], b[3]};
          return gemm.run(gemm_operands, workspace, stream);
        }
        const Buffer gemm_operands[] = {b[1], b[0], b[2]};
        TB_RETURN_IF_ERROR(gemm.run(gemm_operands, workspace, stream));
        return cuda_status(launch_bias_gradient(op_.dtype, op_.mb, op_.out, b[1].data,
                                                as<float>(b[3]), workspace.data, stream),
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

// The operands' data pointers, as the batch norm and pooling launches take them.
std::array<void*, kMaxOperands> pointers(std::span<const Buffer> b) {
  std::array<void*, kMaxOperands> data{};
  std::transform(b.begin(), b.end(), data.begin(), [](const Buffer& x) { return x.data; });
  return data;
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
    *out_ = std::make_unique<KernelPlan>(cast_operands(o), 0,
                                         fmt::format("cast to {}", dtype_name(o.to)), o.from,
                                         [o](std::span<const Buffer> b, void*, cudaStream_t s) {
                                           return launch_cast(o, b[0].data, b[1].data, s);
                                         });
    return Status::Ok();
  }
  Status plan(const UnscaleGradientsOp& o) const {
    if (o.dtype != DType::f32)
      return Status::Unimplemented(
          fmt::format("cuda: gradients are f32 (master), not {}", dtype_name(o.dtype)));
    *out_ = std::make_unique<KernelPlan>(
        unscale_gradients_operands(o), 0, "gradient unscale and finite check", o.dtype,
        [o](std::span<const Buffer> b, void*, cudaStream_t s) {
          return launch_unscale_gradients(o, b[0].data, *as<float>(b[1]), as<std::int32_t>(b[2]),
                                          s);
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
        o.dtype, [o](std::span<const Buffer> b, void* scratch, cudaStream_t s) {
          const bool lamb = o.kind == OptimizerKind::lamb;
          const bool sgd = o.kind == OptimizerKind::sgd_momentum;
          // weights, grads, momentum or m, v[, tensor_offsets], hyper (host)
          return launch_optimizer(
              o, as<float>(b[0]), as<float>(b[1]), as<float>(b[2]), sgd ? nullptr : as<float>(b[3]),
              lamb ? as<std::int32_t>(b[4]) : nullptr, as<float>(b[b.size() - 1]), scratch, s);
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
                   [o](std::span<const Buffer> b, void*, cudaStream_t s) {
                     const bool forward = o.pass == Pass::forward;
                     return launch_eltwise(o, b[0].data, forward ? nullptr : b[1].data,
                                           b[forward ? 1 : 2].data, s);
                   });
  }
  Status plan(const BinaryOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    return kernels(binary_operands(o), 0, o.fuse_relu ? "add + ReLU" : "add",
                   [o](std::span<const Buffer> b, void*, cudaStream_t s) {
                     return launch_add(o, b[0].data, b[1].data, b[2].data, s);
                   });
  }
  Status plan(const DropoutOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    if (!(o.probability >= 0 && o.probability < 1))
      return Status::InvalidArgument("dropout probability must be in [0, 1)");
    return kernels(dropout_operands(o), 0, "dropout (counter-based mask, not stored)",
                   [o](std::span<const Buffer> b, void*, cudaStream_t s) {
                     // The step lives in host memory: read when the kernel is launched.
                     return launch_dropout(o, b[0].data, *as<std::int32_t>(b[1]), b[2].data, s);
                   });
  }
  Status plan(const LayerNormOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    return kernels(layer_norm_operands(o), layer_norm_scratch_bytes(o), "layer norm",
                   [o](std::span<const Buffer> b, void* scratch, cudaStream_t s) {
                     if (o.pass == Pass::forward)
                       return launch_layer_norm_forward(o, b[0].data, as<float>(b[1]),
                                                        as<float>(b[2]), b[3].data, as<float>(b[4]),
                                                        as<float>(b[5]), s);
                     return launch_layer_norm_backward(
                         o, b[0].data, b[1].data, as<float>(b[2]), as<float>(b[4]), as<float>(b[5]),
                         b[6].data, as<float>(b[7]), as<float>(b[8]), scratch, s);
                   });
  }
  Status plan(const SoftmaxOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    if (o.rows_per_mask < 1 || o.rows % o.rows_per_mask != 0)
      return Status::InvalidArgument("softmax: rows must be a multiple of rows_per_mask");
    return kernels(softmax_operands(o), 0, o.masked ? "scaled masked softmax" : "scaled softmax",
                   [o](std::span<const Buffer> b, void*, cudaStream_t s) {
                     if (o.pass == Pass::backward)
                       return launch_softmax_backward(o, b[0].data, b[1].data, b[2].data, s);
                     return launch_softmax_forward(o, b[0].data,
                                                   o.masked ? as<float>(b[1]) : nullptr,
                                                   b[o.masked ? 2 : 1].data, s);
                   });
  }
  Status plan(const SoftmaxCrossEntropyOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    return kernels(
        softmax_cross_entropy_operands(o), softmax_cross_entropy_scratch_bytes(o),
        "softmax cross-entropy", [o](std::span<const Buffer> b, void* scratch, cudaStream_t s) {
          if (o.pass == Pass::forward)
            return launch_softmax_cross_entropy_forward(o, b[0].data, as<std::int32_t>(b[1]),
                                                        b[2].data, b[3].data, scratch, s);
          // The loss scale lives in host memory: read when the kernel is launched.
          const float loss_scale = o.scaled ? *as<float>(b[2]) : 1.0f;
          return launch_softmax_cross_entropy_backward(o, b[0].data, as<std::int32_t>(b[1]),
                                                       loss_scale, b[o.scaled ? 3 : 2].data, s);
        });
  }
  Status plan(const EmbeddingOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    return kernels(
        embedding_operands(o), 0,
        o.pass == Pass::forward ? "row gather" : "row scatter-add (atomic)",
        [o](std::span<const Buffer> b, void*, cudaStream_t s) {
          if (o.pass == Pass::forward)
            return launch_embedding_forward(o, b[0].data, as<std::int32_t>(b[1]), b[2].data, s);
          return launch_embedding_backward(o, b[0].data, as<std::int32_t>(b[1]), b[2].data, s);
        });
  }
  Status plan(const BatchNormOp& o) const {
    TB_RETURN_IF_ERROR(check_data(o.dtype));
    const bool nhwc = channels_last(o.dtype, o.layout);
    return kernels(
        batch_norm_operands(o), batch_norm_scratch_bytes(o),
        fmt::format("batch norm{} ({})", o.fuse_relu ? " + ReLU" : "", nhwc ? "NHWC" : "NCHW"),
        [o](std::span<const Buffer> b, void* scratch, cudaStream_t s) {
          return launch_batch_norm(o, pointers(b).data(), scratch, s);
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
        [o](std::span<const Buffer> b, void*, cudaStream_t s) {
          return launch_pool(o, pointers(b).data(), s);
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

GemmOp fully_connected_gemm(const FullyConnectedOp& op) {
  GemmOp gemm;
  gemm.a_type = gemm.b_type = op.dtype;
  gemm.c_type = storage_dtype(op.dtype);  // a TF32 product is written as f32
  switch (op.direction) {
    case ConvDirection::forward:  // [mb, in] x [out, in]^T
      gemm.m = op.mb, gemm.n = op.out, gemm.k = op.in, gemm.trans_b = true;
      break;
    case ConvDirection::backward_data:  // [mb, out] x [out, in]
      gemm.m = op.mb, gemm.n = op.in, gemm.k = op.out;
      break;
    case ConvDirection::backward_weights:  // [mb, out]^T x [mb, in], fp32 master gradients
      gemm.m = op.out, gemm.n = op.in, gemm.k = op.mb, gemm.trans_a = true;
      gemm.c_type = DType::f32;
      break;
  }
  return gemm;
}

Status plan_training_op(cublasLtHandle_t handle, const OpDesc& desc, std::unique_ptr<Plan>* out) {
  const TrainingPlanner planner(handle, desc, out);
  return std::visit([&](const auto& op) { return planner.plan(op); }, desc);
}

}  // namespace tb::cuda
