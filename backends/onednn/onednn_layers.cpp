// oneDNN plans for a network's layers: convolution, batch norm (+ ReLU), layer norm, pooling,
// ReLU, GELU, tanh, add (+ ReLU) and fully connected, forward and backward. Activations use the
// backend's activation layout so consecutive layers hand blocked data to each other without
// reorders.
#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "backends/cpu_kernels/fully_connected_gemm.h"
#include "backends/cpu_kernels/training_ops.h"
#include "backends/onednn/onednn_api.h"
#include "backends/onednn/onednn_plan.h"
#include "backends/operands.h"

namespace tb::onednn {
namespace {

using Operand = OneDnnPlan::Operand;
using dims = memory::dims;

memory::desc plain_desc(const dims& shape, memory::data_type type) {
  static const tag kPlain[] = {tag::undef, tag::x, tag::nc, tag::ncw, tag::nchw};
  return memory::desc(shape, type, kPlain[shape.size()]);
}

dims pad_right(const dims& in, const dims& out, const dims& kernel, const dims& stride,
               const dims& pad_left) {
  dims right;
  for (std::size_t i = 0; i < in.size(); ++i)
    right.push_back((out[i] - 1) * stride[i] + kernel[i] - in[i] - pad_left[i]);
  return right;
}

Status make(std::unique_ptr<Plan>* out, const dnnl::engine& engine, dnnl::stream& stream,
            dnnl::primitive primitive, const dnnl::primitive_desc_base& pd,
            std::vector<Operand> operands, OneDnnPlan::Epilogue epilogue = {}) {
  *out = std::make_unique<OneDnnPlan>(engine, stream, std::move(primitive), pd, std::move(operands),
                                      std::move(epilogue));
  return Status::Ok();
}

// The layout an op's primitive computes in when it differs from what its callers exchange
// (`none`: the same).
using Computing = std::optional<tag>;

// The layouts a native-layout op tries in turn: the shared one, then the fallbacks.
std::vector<Computing> computing_layouts(Layout layout, const ActivationLayout& shared) {
  std::vector<Computing> layouts = {std::nullopt};
  if (layout != Layout::native) return layouts;
  for (tag t : fallback_layouts(shared.blocked))
    if (t != shared.blocked) layouts.push_back(t);
  return layouts;
}

// The first layout in which `optimized` holds (an optimized kernel exists), or the shared one.
Computing first_optimized(const std::vector<Computing>& layouts,
                          const std::function<bool(const Computing&)>& optimized) {
  for (const Computing& layout : layouts) try {
      if (optimized(layout)) return layout;
    } catch (const dnnl::error&) {  // no kernel at all in this layout: try the next
    }
  return std::nullopt;
}

// A convolution's memory descriptors and operand bindings, shared by its directions and its
// fused forward. Single-op benchmarks let the primitive pick every layout; in a network
// activations use the shared layout (or `computing`) and weights stay plain for the optimizer,
// staged into the layout the primitive picked.
class ConvMemories {
  // First: the public members' initializers read them.
  const ConvOp& op_;
  const ActivationLayout& shared_;
  const Computing& computing_;
  bool chained_;

 public:
  ConvMemories(const ConvOp& op, const ActivationLayout& shared, const Computing& computing)
      : op_(op), shared_(shared), computing_(computing), chained_(op.layout != Layout::any) {}

  memory::desc src() const { return activation(src_dims, op_.ic); }
  memory::desc dst() const { return activation(dst_dims, op_.oc); }
  memory::desc weights(memory::data_type type) const {
    return memory::desc(weight_dims, type, tag::any);
  }
  OperandBinding src_binding(const char* name, int arg, const memory::desc& computed) const {
    return activation_binding(name, arg, plain_desc(src_dims, dt), exchanged(src_dims, op_.ic),
                              computed);
  }
  OperandBinding dst_binding(const char* name, int arg, const memory::desc& computed) const {
    return activation_binding(name, arg, plain_desc(dst_dims, dt), exchanged(dst_dims, op_.oc),
                              computed);
  }
  // Weights (or their gradient, of `type`) exchanged plain, staged into `wanted`.
  OperandBinding weights_binding(const char* name, int arg, memory::data_type type,
                                 const memory::desc& wanted) const {
    const memory::desc plain(weight_dims, type, tag::oihw);
    return chained_ ? OperandBinding{name, arg, plain, plain, wanted}
                    : OperandBinding{name, arg, plain, wanted};
  }

  const memory::data_type dt = to_dnnl(op_.dtype);
  const dims src_dims = {op_.mb, op_.ic, op_.ih, op_.iw},
             weight_dims = {op_.oc, op_.ic, op_.kh, op_.kw},
             dst_dims = {op_.mb, op_.oc, op_.oh(), op_.ow()};
  const dims strides = {op_.sh, op_.sw}, padding = {op_.ph, op_.pw};
  const dnnl::algorithm algorithm = op_.winograd_allowed ? dnnl::algorithm::convolution_auto
                                                         : dnnl::algorithm::convolution_direct;

 private:
  memory::desc activation(const dims& shape, memory::dim channels) const {
    if (!chained_) return memory::desc(shape, dt, tag::any);
    return memory::desc(shape, dt,
                        computing_.value_or(activation_tag(op_.layout, channels, shared_)));
  }
  // What callers exchange, and the binding that stages it into what the primitive computes on.
  memory::desc exchanged(const dims& shape, memory::dim channels) const {
    return memory::desc(shape, dt, activation_tag(op_.layout, channels, shared_));
  }
  OperandBinding activation_binding(const char* name, int arg, const memory::desc& plain,
                                    const memory::desc& caller,
                                    const memory::desc& computed) const {
    return chained_ ? OperandBinding{name, arg, plain, caller, computed}
                    : OperandBinding{name, arg, plain, computed};
  }
};

// Weight gradients stay fp32 for low-precision training (fp32 master weights).
constexpr memory::data_type kDiffWeightsType = memory::data_type::f32;

// The forward convolution with its bias (+ ReLU as a post-op) in the same pass.
Status plan_conv_epilogue(const dnnl::engine& engine, dnnl::stream& stream, const ConvOp& op,
                          const ConvMemories& m, std::unique_ptr<Plan>* out) {
  if (op.direction != ConvDirection::forward)
    return Status::InvalidArgument("a convolution epilogue is for the forward direction");
  dnnl::primitive_attr fused_attr = base_attr();
  if (op.epilogue == ConvEpilogue::bias_relu) {
    dnnl::post_ops relu;
    api::append_relu(relu);
    fused_attr.set_post_ops(relu);
  }
  const memory::desc bias_plain({op.oc}, m.dt, tag::x);
  const auto fused = api::conv_forward(engine, dnnl::prop_kind::forward_training, m.algorithm,
                                       m.src(), m.weights(m.dt), bias_plain, m.dst(), m.strides,
                                       m.padding, m.padding, fused_attr);
  return make(
      out, engine, stream, dnnl::convolution_forward(fused), fused,
      bind_operands(conv_operands(op),
                    {m.src_binding("src", DNNL_ARG_SRC, fused.src_desc()),
                     m.weights_binding("weights", DNNL_ARG_WEIGHTS, m.dt, fused.weights_desc()),
                     {"bias", DNNL_ARG_BIAS, bias_plain, fused.bias_desc()},
                     m.dst_binding("dst", DNNL_ARG_DST, fused.dst_desc())}));
}

Status plan_conv_computing(const dnnl::engine& engine, dnnl::stream& stream, const ConvOp& op,
                           const ActivationLayout& shared, const Computing& computing,
                           std::unique_ptr<Plan>* out) {
  const ConvMemories m(op, shared, computing);
  const dnnl::primitive_attr attr = base_attr();
  const auto forward =
      api::conv_forward(engine, dnnl::prop_kind::forward_training, m.algorithm, m.src(),
                        m.weights(m.dt), {}, m.dst(), m.strides, m.padding, m.padding, attr);
  if (op.epilogue != ConvEpilogue::none) return plan_conv_epilogue(engine, stream, op, m, out);
  const std::vector<OperandSpec> specs = conv_operands(op);
  switch (op.direction) {
    case ConvDirection::forward:
      return make(out, engine, stream, dnnl::convolution_forward(forward), forward,
                  bind_operands(specs, {m.src_binding("src", DNNL_ARG_SRC, forward.src_desc()),
                                        m.weights_binding("weights", DNNL_ARG_WEIGHTS, m.dt,
                                                          forward.weights_desc()),
                                        m.dst_binding("dst", DNNL_ARG_DST, forward.dst_desc())}));
    case ConvDirection::backward_data: {
      const auto pd =
          api::conv_backward_data(engine, m.algorithm, m.src(), m.weights(m.dt), m.dst(), m.strides,
                                  m.padding, m.padding, attr, forward);
      return make(
          out, engine, stream, dnnl::convolution_backward_data(pd), pd,
          bind_operands(specs,
                        {m.dst_binding("diff_dst", DNNL_ARG_DIFF_DST, pd.diff_dst_desc()),
                         m.weights_binding("weights", DNNL_ARG_WEIGHTS, m.dt, pd.weights_desc()),
                         m.src_binding("diff_src", DNNL_ARG_DIFF_SRC, pd.diff_src_desc())}));
    }
    case ConvDirection::backward_weights: {
      const auto pd =
          api::conv_backward_weights(engine, m.algorithm, m.src(), m.weights(kDiffWeightsType),
                                     m.dst(), m.strides, m.padding, m.padding, attr, forward);
      return make(
          out, engine, stream, dnnl::convolution_backward_weights(pd), pd,
          bind_operands(specs, {m.src_binding("src", DNNL_ARG_SRC, pd.src_desc()),
                                m.dst_binding("diff_dst", DNNL_ARG_DIFF_DST, pd.diff_dst_desc()),
                                m.weights_binding("diff_weights", DNNL_ARG_DIFF_WEIGHTS,
                                                  kDiffWeightsType, pd.diff_weights_desc())}));
    }
  }
  return Status::InvalidArgument("unknown convolution direction");
}

// A convolution direction has no state shared with the others, so each falls back alone.
Status plan_conv(const dnnl::engine& engine, dnnl::stream& stream, const ConvOp& op,
                 const ActivationLayout& shared, std::unique_ptr<Plan>* out) {
  const Computing computing =
      first_optimized(computing_layouts(op.layout, shared), [&](const Computing& layout) {
        std::unique_ptr<Plan> attempt;
        return plan_conv_computing(engine, stream, op, shared, layout, &attempt).ok() &&
               !attempt->is_reference();
      });
  return plan_conv_computing(engine, stream, op, shared, computing, out);
}

// Batch norm's forward and backward share the ReLU mask, whose format follows the layout, so
// both passes compute in the first layout where both have optimized kernels.
Status plan_batch_norm_computing(const dnnl::engine& engine, dnnl::stream& stream,
                                 const BatchNormOp& op, const ActivationLayout& shared,
                                 const Computing& computing, std::unique_ptr<Plan>* out,
                                 bool* both_passes_optimized = nullptr) {
  const dims shape = {op.mb, op.channels, op.h, op.w};
  const memory::data_type dt = to_dnnl(op.dtype);
  const memory::desc exchanged(shape, dt, activation_tag(op.layout, op.channels, shared)),
      data = computing ? memory::desc(shape, dt, *computing) : exchanged,
      plain = plain_desc(shape, dt), channel({op.channels}, memory::data_type::f32, tag::x);
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (op.fuse_relu) flags |= dnnl::normalization_flags::fuse_norm_relu;
  const dnnl::primitive_attr attr = base_attr();
  if (op.inference) {
    const auto inference =
        api::batch_norm_forward(engine, dnnl::prop_kind::forward_inference, data, op.epsilon,
                                flags | dnnl::normalization_flags::use_global_stats, attr);
    if (both_passes_optimized)
      *both_passes_optimized = !is_reference_implementation(inference.impl_info_str());
    return make(out, engine, stream, dnnl::batch_normalization_forward(inference), inference,
                bind_operands(batch_norm_operands(op),
                              {{"src", DNNL_ARG_SRC, plain, exchanged, data},
                               {"gamma", DNNL_ARG_SCALE, channel, channel},
                               {"beta", DNNL_ARG_SHIFT, channel, channel},
                               {"running_mean", DNNL_ARG_MEAN, channel, channel},
                               {"running_var", DNNL_ARG_VARIANCE, channel, channel},
                               {"dst", DNNL_ARG_DST, plain, exchanged, data}}));
  }
  const auto forward = api::batch_norm_forward(engine, dnnl::prop_kind::forward_training, data,
                                               op.epsilon, flags, attr);
  const std::vector<OperandSpec> specs = batch_norm_operands(op);
  const memory::desc mask = forward.workspace_desc();
  const auto backward = api::batch_norm_backward(engine, data, op.epsilon, flags, attr, forward);
  if (both_passes_optimized)
    *both_passes_optimized = !is_reference_implementation(forward.impl_info_str()) &&
                             !is_reference_implementation(backward.impl_info_str());
  if (op.pass == Pass::forward) {
    std::vector<OperandBinding> bindings = {
        {"src", DNNL_ARG_SRC, plain, exchanged, data},
        {"gamma", DNNL_ARG_SCALE, channel, channel},
        {"beta", DNNL_ARG_SHIFT, channel, channel},
        {"dst", DNNL_ARG_DST, plain, exchanged, data},
        {"mean", DNNL_ARG_MEAN, channel, channel},
        {"variance", DNNL_ARG_VARIANCE, channel, channel},
        {"running_mean", OneDnnPlan::kNoArgument, channel, channel},
        {"running_var", OneDnnPlan::kNoArgument, channel, channel}};
    if (op.fuse_relu) bindings.push_back({"relu_mask", DNNL_ARG_WORKSPACE, mask, mask});
    // oneDNN computes the batch statistics; the running ones are ours to keep.
    const std::int64_t channels = op.channels, reduced = op.mb * op.h * op.w;
    const float momentum = op.momentum;
    auto epilogue = [channels, reduced, momentum](const BoundOperands& b) {
      cpu::update_running_stats(b.in<float>("mean"), b.in<float>("variance"), channels, reduced,
                                momentum, b.out<float>("running_mean"),
                                b.out<float>("running_var"));
    };
    return make(out, engine, stream, dnnl::batch_normalization_forward(forward), forward,
                bind_operands(specs, bindings), epilogue);
  }
  std::vector<OperandBinding> bindings = {
      {"src", DNNL_ARG_SRC, plain, exchanged, data},
      {"diff_dst", DNNL_ARG_DIFF_DST, plain, exchanged, data},
      {"gamma", DNNL_ARG_SCALE, channel, channel},
      {"beta", api::batch_norm_backward_shift_arg(), channel, channel},
      {"mean", DNNL_ARG_MEAN, channel, channel},
      {"variance", DNNL_ARG_VARIANCE, channel, channel}};
  if (op.fuse_relu) bindings.push_back({"relu_mask", DNNL_ARG_WORKSPACE, mask, mask});
  bindings.push_back({"diff_src", DNNL_ARG_DIFF_SRC, plain, exchanged, data});
  bindings.push_back({"diff_gamma", DNNL_ARG_DIFF_SCALE, channel, channel});
  bindings.push_back({"diff_beta", DNNL_ARG_DIFF_SHIFT, channel, channel});
  return make(out, engine, stream, dnnl::batch_normalization_backward(backward), backward,
              bind_operands(specs, bindings));
}

Status plan_batch_norm(const dnnl::engine& engine, dnnl::stream& stream, const BatchNormOp& op,
                       const ActivationLayout& shared, std::unique_ptr<Plan>* out) {
  const Computing computing =
      first_optimized(computing_layouts(op.layout, shared), [&](const Computing& layout) {
        std::unique_ptr<Plan> attempt;
        bool optimized = false;
        return plan_batch_norm_computing(engine, stream, op, shared, layout, &attempt, &optimized)
                   .ok() &&
               optimized;
      });
  return plan_batch_norm_computing(engine, stream, op, shared, computing, out);
}

// Max pooling's forward and backward share the indices, as batch norm shares its mask.
Status plan_pool_computing(const dnnl::engine& engine, dnnl::stream& stream, const PoolOp& op,
                           const ActivationLayout& shared, const Computing& computing,
                           std::unique_ptr<Plan>* out, bool* both_passes_optimized = nullptr) {
  const dims src_dims = {op.mb, op.channels, op.ih, op.iw},
             dst_dims = {op.mb, op.channels, op.oh(), op.ow()};
  const memory::data_type dt = to_dnnl(op.dtype);
  const tag exchanged_tag = activation_tag(op.layout, op.channels, shared),
            layout = computing.value_or(exchanged_tag);
  const memory::desc src(src_dims, dt, layout), dst(dst_dims, dt, layout),
      src_exchanged(src_dims, dt, exchanged_tag), dst_exchanged(dst_dims, dt, exchanged_tag),
      src_plain = plain_desc(src_dims, dt), dst_plain = plain_desc(dst_dims, dt);
  const bool max = op.kind == PoolKind::max;
  const auto algorithm =
      max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  const dims strides = {op.sh, op.sw}, kernel = {op.kh, op.kw}, pad_left = {op.ph, op.pw};
  const dims pad_r = pad_right({op.ih, op.iw}, {op.oh(), op.ow()}, kernel, strides, pad_left);
  const dnnl::primitive_attr attr = base_attr();
  const auto forward = api::pooling_forward(engine, dnnl::prop_kind::forward_training, algorithm,
                                            src, dst, strides, kernel, pad_left, pad_r, attr);
  const std::vector<OperandSpec> specs = pool_operands(op);
  const memory::desc indices = forward.workspace_desc();
  const auto backward = api::pooling_backward(engine, algorithm, src, dst, strides, kernel,
                                              pad_left, pad_r, attr, forward);
  if (both_passes_optimized)
    *both_passes_optimized = !is_reference_implementation(forward.impl_info_str()) &&
                             !is_reference_implementation(backward.impl_info_str());
  if (op.pass == Pass::forward) {
    std::vector<OperandBinding> bindings = {{"src", DNNL_ARG_SRC, src_plain, src_exchanged, src},
                                            {"dst", DNNL_ARG_DST, dst_plain, dst_exchanged, dst}};
    if (max) bindings.push_back({"indices", DNNL_ARG_WORKSPACE, indices, indices});
    return make(out, engine, stream, dnnl::pooling_forward(forward), forward,
                bind_operands(specs, bindings));
  }
  std::vector<OperandBinding> bindings = {
      {"diff_dst", DNNL_ARG_DIFF_DST, dst_plain, dst_exchanged, dst}};
  if (max) bindings.push_back({"indices", DNNL_ARG_WORKSPACE, indices, indices});
  bindings.push_back({"diff_src", DNNL_ARG_DIFF_SRC, src_plain, src_exchanged, src});
  return make(out, engine, stream, dnnl::pooling_backward(backward), backward,
              bind_operands(specs, bindings));
}

Status plan_pool(const dnnl::engine& engine, dnnl::stream& stream, const PoolOp& op,
                 const ActivationLayout& shared, std::unique_ptr<Plan>* out) {
  const Computing computing =
      first_optimized(computing_layouts(op.layout, shared), [&](const Computing& layout) {
        std::unique_ptr<Plan> attempt;
        bool optimized = false;
        return plan_pool_computing(engine, stream, op, shared, layout, &attempt, &optimized).ok() &&
               optimized;
      });
  return plan_pool_computing(engine, stream, op, shared, computing, out);
}

Status plan_eltwise(const dnnl::engine& engine, dnnl::stream& stream, const EltwiseOp& op,
                    std::unique_ptr<Plan>* out) {
  const memory::desc data({op.count}, to_dnnl(op.dtype), tag::x);
  // ReLU's and tanh's gradients are known from their output, so their backward needs dst only
  // (no saved input); GELU's needs its input.
  const bool from_dst = op.kind != EltwiseKind::gelu;
  const auto algorithm =
      op.kind == EltwiseKind::relu   ? dnnl::algorithm::eltwise_relu_use_dst_for_bwd
      : op.kind == EltwiseKind::tanh ? dnnl::algorithm::eltwise_tanh_use_dst_for_bwd
                                     : dnnl::algorithm::eltwise_gelu_erf;
  const dnnl::primitive_attr attr = base_attr();
  const auto forward =
      api::eltwise_forward(engine, dnnl::prop_kind::forward_training, algorithm, data, attr);
  const std::vector<OperandSpec> specs = eltwise_operands(op);
  if (op.pass == Pass::forward)
    return make(out, engine, stream, dnnl::eltwise_forward(forward), forward,
                bind_operands(
                    specs, {{"src", DNNL_ARG_SRC, data, data}, {"dst", DNNL_ARG_DST, data, data}}));
  const auto pd = api::eltwise_backward(engine, algorithm, data, attr, forward);
  return make(out, engine, stream, dnnl::eltwise_backward(pd), pd,
              bind_operands(specs, {{from_dst ? "dst" : "src",
                                     from_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, data, data},
                                    {"diff_dst", DNNL_ARG_DIFF_DST, data, data},
                                    {"diff_src", DNNL_ARG_DIFF_SRC, data, data}}));
}

Status plan_layer_norm(const dnnl::engine& engine, dnnl::stream& stream, const LayerNormOp& op,
                       std::unique_ptr<Plan>* out) {
  const memory::desc data({op.rows, op.cols}, to_dnnl(op.dtype), tag::ab),
      column({op.cols}, memory::data_type::f32, tag::x),
      row({op.rows}, memory::data_type::f32, tag::x);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  const dnnl::primitive_attr attr = base_attr();
  const auto forward = api::layer_norm_forward(engine, dnnl::prop_kind::forward_training, data, row,
                                               op.epsilon, flags, attr);
  const std::vector<OperandSpec> specs = layer_norm_operands(op);
  if (op.pass == Pass::forward)
    return make(out, engine, stream, dnnl::layer_normalization_forward(forward), forward,
                bind_operands(specs, {{"src", DNNL_ARG_SRC, data, data},
                                      {"gamma", DNNL_ARG_SCALE, column, column},
                                      {"beta", DNNL_ARG_SHIFT, column, column},
                                      {"dst", DNNL_ARG_DST, data, data},
                                      {"mean", DNNL_ARG_MEAN, row, row},
                                      {"variance", DNNL_ARG_VARIANCE, row, row}}));
  const auto pd = api::layer_norm_backward(engine, data, row, op.epsilon, flags, attr, forward);
  return make(out, engine, stream, dnnl::layer_normalization_backward(pd), pd,
              bind_operands(specs, {{"src", DNNL_ARG_SRC, data, data},
                                    {"diff_dst", DNNL_ARG_DIFF_DST, data, data},
                                    {"gamma", DNNL_ARG_SCALE, column, column},
                                    {"beta", DNNL_ARG_SHIFT, column, column},
                                    {"mean", DNNL_ARG_MEAN, row, row},
                                    {"variance", DNNL_ARG_VARIANCE, row, row},
                                    {"diff_src", DNNL_ARG_DIFF_SRC, data, data},
                                    {"diff_gamma", DNNL_ARG_DIFF_SCALE, column, column},
                                    {"diff_beta", DNNL_ARG_DIFF_SHIFT, column, column}}));
}

Status plan_add(const dnnl::engine& engine, dnnl::stream& stream, const BinaryOp& op,
                std::unique_ptr<Plan>* out) {
  const memory::desc data({op.count}, to_dnnl(op.dtype), tag::x);
  dnnl::primitive_attr attr = base_attr();
  if (op.fuse_relu) {
    dnnl::post_ops post_ops;
    api::append_relu(post_ops);
    attr.set_post_ops(post_ops);
  }
  const auto pd = api::binary(engine, dnnl::algorithm::binary_add, data, data, data, attr);
  return make(out, engine, stream, dnnl::binary(pd), pd,
              bind_operands(binary_operands(op), {{"src0", DNNL_ARG_SRC_0, data, data},
                                                  {"src1", DNNL_ARG_SRC_1, data, data},
                                                  {"dst", DNNL_ARG_DST, data, data}}));
}

// Fully connected layers on oneDNN's matmul, on the row-major operands the step keeps (weights
// [out, in], as the optimizer and the frameworks store them): forward dst = src W^T + bias (W
// read transposed through its strides, the bias a matmul argument); backward-data diff_src =
// diff_dst W; backward-weights diff_W = diff_dst^T src into fp32 (diff_dst read transposed),
// and diff_bias its column sums. Measured alone on BERT-base's layers (1024 rows, 768 <-> 3072)
// on a Zen 5: bf16 545-650 GFLOP/s per direction where the inner-product primitive reached 528
// over the three; fp32 297-337 where dnnl_sgemm reached 303-317. Weights in the layout matmul
// prefers (prepacked) measured no faster there (bf16 590-604, fp32 313).
Status plan_fully_connected(const dnnl::engine& engine, dnnl::stream& stream,
                            const FullyConnectedOp& op, std::unique_ptr<Plan>* out) {
  const memory::data_type dt = to_dnnl(op.dtype), grad_dt = memory::data_type::f32;
  const memory::dim mb = op.mb, in = op.in, outputs = op.out;
  // A row-major [rows, cols] matrix, or the transpose of one stored [cols, rows].
  auto rows_of = [](memory::dim rows, memory::dim cols, memory::data_type type) {
    return memory::desc({rows, cols}, type, tag::ab);
  };
  auto transposed = [](memory::dim rows, memory::dim cols, memory::data_type type) {
    return memory::desc({rows, cols}, type, memory::dims{1, rows});
  };
  const dnnl::primitive_attr attr = base_attr();
  const std::vector<OperandSpec> specs = fully_connected_operands(op);
  switch (op.direction) {
    case ConvDirection::forward: {
      const memory::desc src = rows_of(mb, in, dt), weights = transposed(in, outputs, dt),
                         bias = rows_of(1, outputs, dt), dst = rows_of(mb, outputs, dt);
      const auto pd = api::matmul(engine, src, weights, dst, attr, bias);
      return make(out, engine, stream, dnnl::matmul(pd), pd,
                  bind_operands(specs, {{"src", DNNL_ARG_SRC, src, src},
                                        {"weights", DNNL_ARG_WEIGHTS, weights, weights},
                                        {"bias", DNNL_ARG_BIAS, bias, bias},
                                        {"dst", DNNL_ARG_DST, dst, dst}}));
    }
    case ConvDirection::backward_data: {
      const memory::desc diff_dst = rows_of(mb, outputs, dt), weights = rows_of(outputs, in, dt),
                         diff_src = rows_of(mb, in, dt);
      const auto pd = api::matmul(engine, diff_dst, weights, diff_src, attr);
      return make(out, engine, stream, dnnl::matmul(pd), pd,
                  bind_operands(specs, {{"diff_dst", DNNL_ARG_SRC, diff_dst, diff_dst},
                                        {"weights", DNNL_ARG_WEIGHTS, weights, weights},
                                        {"diff_src", DNNL_ARG_DST, diff_src, diff_src}}));
    }
    case ConvDirection::backward_weights: {
      const memory::desc diff_dst = transposed(outputs, mb, dt), src = rows_of(mb, in, dt),
                         diff_weights = rows_of(outputs, in, grad_dt),
                         diff_bias({outputs}, grad_dt, tag::x);
      const auto pd = api::matmul(engine, diff_dst, src, diff_weights, attr);
      auto bias_gradient = [mb, outputs, dtype = op.dtype](const BoundOperands& b) {
        float* sums = b.out<float>("diff_bias");
        if (dtype == DType::f32)
          cpu::column_sums(b.in<float>("diff_dst"), mb, outputs, sums);
        else
          cpu::column_sums(b.in<std::uint16_t>("diff_dst"), dtype, mb, outputs, sums);
      };
      return make(
          out, engine, stream, dnnl::matmul(pd), pd,
          bind_operands(specs, {{"src", DNNL_ARG_WEIGHTS, src, src},
                                {"diff_dst", DNNL_ARG_SRC, diff_dst, diff_dst},
                                {"diff_weights", DNNL_ARG_DST, diff_weights, diff_weights},
                                {"diff_bias", OneDnnPlan::kNoArgument, diff_bias, diff_bias}}),
          bias_gradient);
    }
  }
  return Status::InvalidArgument("unknown fully connected direction");
}

}  // namespace

Status LayerPlanner::plan(const ConvOp& op) const {
  return plan_conv(engine_, stream_, op, shared_, out_);
}
Status LayerPlanner::plan(const BatchNormOp& op) const {
  return plan_batch_norm(engine_, stream_, op, shared_, out_);
}
Status LayerPlanner::plan(const PoolOp& op) const {
  return plan_pool(engine_, stream_, op, shared_, out_);
}
Status LayerPlanner::plan(const EltwiseOp& op) const {
  return plan_eltwise(engine_, stream_, op, out_);
}
Status LayerPlanner::plan(const LayerNormOp& op) const {
  return plan_layer_norm(engine_, stream_, op, out_);
}
Status LayerPlanner::plan(const BinaryOp& op) const {
  return plan_add(engine_, stream_, op, out_);
}
Status LayerPlanner::plan(const FullyConnectedOp& op) const {
  return plan_fully_connected(engine_, stream_, op, out_);
}

std::vector<OneDnnPlan::Operand> bind_operands(const std::vector<OperandSpec>& specs,
                                               const std::vector<OperandBinding>& bindings) {
  std::vector<OneDnnPlan::Operand> operands;
  for (const OperandSpec& spec : specs) {
    const auto binding = std::find_if(bindings.begin(), bindings.end(),
                                      [&](const OperandBinding& b) { return spec.name == b.name; });
    if (binding == bindings.end())
      throw std::logic_error(fmt::format("oneDNN: operand '{}' is not bound", spec.name));
    operands.push_back({spec, binding->arg, binding->plain, binding->planned, binding->primitive});
  }
  if (operands.size() != bindings.size())
    throw std::logic_error(
        fmt::format("oneDNN: {} bindings for {} operands", bindings.size(), operands.size()));
  return operands;
}

}  // namespace tb::onednn
