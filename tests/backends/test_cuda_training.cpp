// The cuda backend's training ops, device-independent parts on the CPU: the per-element math
// its kernels share (training_math.h) against the shared CPU code's double-precision ops, and
// the plans (operands, workspace, refusals), which need no GPU to make.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/training_kernels.h"
#include "backends/cuda/training_math.h"
#include "backends/cuda/training_ops.h"
#include "backends/low_precision.h"
#include "backends/numeric.h"
#include "backends/operands.h"
#include "tests/models/support.h"

namespace tb::cuda {
namespace {

using testing_support::make_backend;
using testing_support::make_cpu_backend;
using testing_support::random;
using testing_support::run_op;

// The shared CPU code's f64 op, run on a CPU backend.
class CudaTrainingMath : public testing::Test {
 protected:
  void SetUp() override {
    cpu_ = make_cpu_backend();
    if (!cpu_) GTEST_SKIP() << "no CPU backend in this build";
  }
  std::unique_ptr<Backend> cpu_;
};

TEST_F(CudaTrainingMath, ActivationsMatchTheDoublePrecisionOps) {
  std::vector<double> x = random(4096, 3), dy = random(4096, 5);
  for (double& v : x) v *= 8;  // [-8, 8): GELU's tails and its curved middle
  for (EltwiseKind kind : {EltwiseKind::gelu, EltwiseKind::tanh, EltwiseKind::relu}) {
    EltwiseOp op;
    op.kind = kind, op.count = static_cast<std::int64_t>(x.size()), op.dtype = DType::f64;
    const std::vector<double> y = run_op(*cpu_, op, {x}).at(1);
    op.pass = Pass::backward;
    const std::vector<double>& first = kind == EltwiseKind::gelu ? x : y;
    const std::vector<double> dx = run_op(*cpu_, op, {first, dy}).at(2);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float xf = static_cast<float>(x[i]), yf = static_cast<float>(y[i]);
      const float dyf = static_cast<float>(dy[i]);
      const float forward = kind == EltwiseKind::gelu   ? gelu(xf)
                            : kind == EltwiseKind::tanh ? std::tanh(xf)
                                                        : (xf > 0 ? xf : 0.0f);
      const float backward = kind == EltwiseKind::gelu   ? gelu_gradient(xf, dyf)
                             : kind == EltwiseKind::tanh ? tanh_gradient(yf, dyf)
                                                         : relu_gradient(yf, dyf);
      EXPECT_NEAR(forward, y[i], 2e-6 * (1 + std::fabs(y[i]))) << i;
      EXPECT_NEAR(backward, dx[i], 2e-6 * (1 + std::fabs(dx[i]))) << i;
    }
  }
}

// The GPU drops exactly the elements the CPU drops, and scales the kept ones the same way.
TEST_F(CudaTrainingMath, DropoutDropsWhatTheCpuDrops) {
  DropoutOp op;
  op.count = 10000, op.probability = 0.1f, op.seed = 77, op.dtype = DType::f32;
  const std::vector<double> x = random(op.count, 9);
  for (std::int32_t step : {0, 1, 41}) {
    const std::vector<double> cpu = run_op(*cpu_, op, {x, {double(step)}}).at(2);
    const std::uint64_t threshold = dropout_threshold(op.probability);
    const float scale = static_cast<float>(1.0 / (1.0 - op.probability));
    int dropped = 0;
    for (std::int64_t i = 0; i < op.count; ++i) {
      const float gpu =
          dropout_element(static_cast<float>(x[i]), op.seed, step, i, threshold, scale);
      ASSERT_EQ(gpu, static_cast<float>(cpu[i])) << "step " << step << " element " << i;
      dropped += gpu == 0.0f;
    }
    EXPECT_NEAR(dropped, 1000, 120);
  }
}

// The kernels' normalization gradient, with their sums, against the f64 layer norm and batch
// norm backward ops.
TEST_F(CudaTrainingMath, NormalizationGradientsMatchTheDoublePrecisionOps) {
  LayerNormOp layer;
  layer.rows = 6, layer.cols = 77, layer.dtype = DType::f64;
  const std::size_t n = layer.rows * layer.cols;
  const std::vector<double> x = random(n, 1), dy = random(n, 2), gamma = random(77, 3),
                            beta = random(77, 4);
  const auto forward = run_op(*cpu_, layer, {x, gamma, beta});
  const std::vector<double>&mean = forward.at(4), &variance = forward.at(5);
  layer.pass = Pass::backward;
  const std::vector<double> dx = run_op(*cpu_, layer, {x, dy, gamma, beta, mean, variance}).at(6);
  for (std::int64_t r = 0; r < layer.rows; ++r) {
    const float rstd = 1.0f / std::sqrt(static_cast<float>(variance[r]) + layer.epsilon);
    float sum_g = 0, sum_g_xhat = 0;
    for (std::int64_t c = 0; c < layer.cols; ++c) {
      const float g = static_cast<float>(dy[r * layer.cols + c] * gamma[c]);
      sum_g += g;
      sum_g_xhat += g * static_cast<float>(x[r * layer.cols + c] - mean[r]) * rstd;
    }
    for (std::int64_t c = 0; c < layer.cols; ++c) {
      const std::size_t i = r * layer.cols + c;
      const float got = normalization_gradient(static_cast<float>(dy[i] * gamma[c]),
                                               static_cast<float>(x[i] - mean[r]) * rstd, sum_g,
                                               sum_g_xhat, rstd, static_cast<float>(layer.cols));
      EXPECT_NEAR(got, dx[i], 1e-4 * (1 + std::fabs(dx[i]))) << r << ", " << c;
    }
  }

  BatchNormOp batch;
  batch.mb = 3, batch.channels = 4, batch.h = 5, batch.w = 6, batch.dtype = DType::f64;
  const std::int64_t plane = batch.h * batch.w, m = batch.mb * batch.channels * plane;
  const std::vector<double> bx = random(m, 5), bdy = random(m, 6), bgamma = random(4, 7),
                            bbeta = random(4, 8);
  std::vector<double> running_mean(4, 0.25), running_var(4, 2.0);
  const std::vector<double> unread_data(m), unread_channels(4);  // outputs
  const auto stats = run_op(*cpu_, batch,
                            {bx, bgamma, bbeta, unread_data, unread_channels, unread_channels,
                             running_mean, running_var});
  const std::vector<double>&bmean = stats.at(4), &bvar = stats.at(5);
  for (std::int64_t c = 0; c < batch.channels;
       ++c) {  // running statistics, as the kernel updates them
    EXPECT_NEAR(running_mean_update(0.25f, static_cast<float>(bmean[c]), batch.momentum),
                stats.at(6)[c], 1e-6);
    EXPECT_NEAR(running_variance_update(2.0f, static_cast<float>(bvar[c]), batch.mb * plane,
                                        batch.momentum),
                stats.at(7)[c], 1e-5);
  }
  batch.pass = Pass::backward;
  const auto grads = run_op(*cpu_, batch, {bx, bdy, bgamma, bbeta, bmean, bvar});
  for (std::int64_t c = 0; c < batch.channels; ++c) {
    const float inv_std = 1.0f / std::sqrt(static_cast<float>(bvar[c]) + batch.epsilon);
    float sum_dy = 0, sum_dy_xhat = 0;
    auto xhat = [&](std::int64_t i) { return static_cast<float>(bx[i] - bmean[c]) * inv_std; };
    for (std::int64_t image = 0; image < batch.mb; ++image)
      for (std::int64_t p = 0; p < plane; ++p) {
        const std::int64_t i = (image * batch.channels + c) * plane + p;
        sum_dy += static_cast<float>(bdy[i]);
        sum_dy_xhat += static_cast<float>(bdy[i]) * xhat(i);
      }
    EXPECT_NEAR(sum_dy, grads.at(8)[c], 1e-4);       // diff_beta
    EXPECT_NEAR(sum_dy_xhat, grads.at(7)[c], 1e-4);  // diff_gamma
    for (std::int64_t image = 0; image < batch.mb; ++image)
      for (std::int64_t p = 0; p < plane; ++p) {
        const std::int64_t i = (image * batch.channels + c) * plane + p;
        const float got = normalization_gradient(
            static_cast<float>(bdy[i]), xhat(i), sum_dy, sum_dy_xhat,
            static_cast<float>(bgamma[c]) * inv_std, static_cast<float>(batch.mb * plane));
        EXPECT_NEAR(got, grads.at(6)[i], 1e-4 * (1 + std::fabs(grads.at(6)[i]))) << i;
      }
  }
}

// The max-pooling backward kernel gathers from the outputs whose windows cover an input: the
// range must be exactly those outputs, for every kernel, stride and padding.
TEST(CudaPoolingMath, CoveringOutputsAreExactlyTheWindowsThatContainTheInput) {
  for (std::int64_t k = 1; k <= 4; ++k)
    for (std::int64_t s = 1; s <= 3; ++s)
      for (std::int64_t p = 0; p < k; ++p)
        for (std::int64_t size = k; size <= 12; ++size) {
          const std::int64_t outputs = (size + 2 * p - k) / s + 1;
          for (std::int64_t in = 0; in < size; ++in) {
            const WindowRange range = covering_outputs(in, k, s, p, outputs);
            for (std::int64_t o = 0; o < outputs; ++o) {
              const bool covers = o * s - p <= in && in <= o * s - p + k - 1;
              const bool in_range = range.first <= o && o <= range.last;
              ASSERT_EQ(covers, in_range) << "k " << k << " s " << s << " p " << p << " size "
                                          << size << " in " << in << " o " << o;
            }
          }
        }
}

// cuDNN's batch norm keeps inverse standard deviations; the ops keep the batch variance. The
// conversions round-trip to float precision, and a constant channel's variance stays 0.
TEST(CudaNormalizationMath, BatchVarianceAndCudnnsInverseStdConvertBothWays) {
  for (float epsilon : {1e-5f, 1e-3f})
    for (float variance : {0.0f, 1e-4f, 0.37f, 1.0f, 52.5f, 4096.0f}) {
      const float inverse = inverse_std(variance, epsilon);
      EXPECT_NEAR(inverse, 1.0 / std::sqrt(static_cast<double>(variance) + epsilon),
                  1e-6 * inverse);
      EXPECT_NEAR(variance_from_inverse_std(inverse, epsilon), variance,
                  4e-7 * (variance + epsilon))
          << variance;
      EXPECT_GE(variance_from_inverse_std(inverse, epsilon), 0.0f);
    }
}

// Channels-last max pooling, emulated on the host with the kernels' window arithmetic over
// NHWC data, equals the f64 op on NCHW data: values, recorded positions and input gradients.
TEST_F(CudaTrainingMath, ChannelsLastMaxPoolingMatchesTheDoublePrecisionOp) {
  PoolOp op;
  op.mb = 2, op.channels = 3, op.ih = 9, op.iw = 8, op.kh = op.kw = 3;
  op.sh = op.sw = 2, op.ph = op.pw = 1, op.dtype = DType::f64, op.layout = Layout::plain;
  const ActivationShape in{op.mb, op.channels, op.ih, op.iw, true},
      out{op.mb, op.channels, op.oh(), op.ow(), true};
  ActivationShape in_plain = in, out_plain = out;
  in_plain.nhwc = out_plain.nhwc = false;
  const std::int64_t inputs = op.mb * op.channels * op.ih * op.iw,
                     outputs = op.mb * op.channels * op.oh() * op.ow();
  const std::vector<double> x = random(inputs, 11), dy = random(outputs, 12);
  const auto forward = run_op(*cpu_, op, {x});  // src, dst, indices
  op.pass = Pass::backward;
  const std::vector<double> dx = run_op(*cpu_, op, {dy, forward.at(2)}).at(2);

  // The kernels' view: NHWC copies.
  std::vector<float> x_nhwc(inputs), dy_nhwc(outputs);
  std::vector<std::int64_t> where(outputs);
  auto each = [&](const ActivationShape& shape, auto body) {
    for (std::int64_t n = 0; n < shape.n; ++n)
      for (std::int64_t c = 0; c < shape.c; ++c)
        for (std::int64_t y = 0; y < shape.h; ++y)
          for (std::int64_t w = 0; w < shape.w; ++w) body(n, c, y, w);
  };
  each(in, [&](auto n, auto c, auto y, auto w) {
    x_nhwc[in.offset(n, c, y, w)] = static_cast<float>(x[in_plain.offset(n, c, y, w)]);
  });
  each(out, [&](auto n, auto c, auto y, auto w) {
    dy_nhwc[out.offset(n, c, y, w)] = static_cast<float>(dy[out_plain.offset(n, c, y, w)]);
  });
  each(out, [&](auto n, auto c, auto y, auto w) {
    const WindowMax best =
        max_pool_window(op, in, n, c, y, w, [&](std::int64_t k) { return x_nhwc[k]; });
    const std::int64_t plain = out_plain.offset(n, c, y, w);
    EXPECT_EQ(best.value, static_cast<float>(forward.at(1)[plain])) << plain;
    EXPECT_EQ(best.where, forward.at(2)[plain]) << plain;
    where[out.offset(n, c, y, w)] = best.where;
  });
  each(in, [&](auto n, auto c, auto y, auto w) {
    const float got = max_pool_input_gradient(
        op, out, n, c, y, w, [&](std::int64_t k) { return dy_nhwc[k]; },
        [&](std::int64_t k) { return where[k]; });
    EXPECT_NEAR(got, dx[in_plain.offset(n, c, y, w)], 1e-6) << n << c << y << w;
  });
}

// Plans need no GPU: every training op plans in f32, bf16 and f16 with the operand list every
// backend shares, and what the kernels cannot do is refused with a reason.
TEST(CudaTrainingPlans, EveryTrainingOpPlansWithTheSharedOperands) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    BatchNormOp bn;
    bn.mb = 2, bn.channels = 8, bn.h = bn.w = 7, bn.fuse_relu = true, bn.dtype = dtype;
    BatchNormOp bn_backward = bn, bn_inference = bn;
    bn_backward.pass = Pass::backward, bn_inference.inference = true;
    EltwiseOp gelu_backward{EltwiseKind::gelu, Pass::backward, 100, dtype};
    PoolOp pool;
    pool.mb = 2, pool.channels = 3, pool.ih = pool.iw = 9, pool.kh = pool.kw = 3;
    pool.sh = pool.sw = 2, pool.ph = pool.pw = 1, pool.dtype = dtype;
    LayerNormOp layer_norm{Pass::backward, 12, 64, 1e-12f, dtype};
    SoftmaxOp softmax{Pass::forward, 16, 8, 0.125f, true, 8, dtype};
    SoftmaxCrossEntropyOp loss{Pass::forward, 4, 10, dtype};
    EmbeddingOp embedding{Pass::backward, 20, 50, 16, false, true, dtype};
    DropoutOp dropout{Pass::forward, 100, 0.1f, 3, dtype};
    BinaryOp add{BinaryKind::add, 100, true, dtype};
    CastOp cast{100, DType::f32, dtype};
    RmsNormOp rms_norm{Pass::forward, 12, 64, 1e-5f, dtype}, rms_norm_backward = rms_norm;
    rms_norm_backward.pass = Pass::backward;
    struct Case {
      OpDesc op;
      std::vector<OperandSpec> operands;
      bool needs_scratch;
    };
    const std::vector<Case> cases = {
        {bn, batch_norm_operands(bn), true},
        {bn_backward, batch_norm_operands(bn_backward), true},
        {bn_inference, batch_norm_operands(bn_inference), false},
        {gelu_backward, eltwise_operands(gelu_backward), false},
        {pool, pool_operands(pool), false},
        {layer_norm, layer_norm_operands(layer_norm), true},
        {softmax, softmax_operands(softmax), false},
        {loss, softmax_cross_entropy_operands(loss), true},
        {embedding, embedding_operands(embedding), false},
        {dropout, dropout_operands(dropout), false},
        {add, binary_operands(add), false},
        {cast, cast_operands(cast), false},
        {rms_norm, rms_norm_operands(rms_norm), false},
        {rms_norm_backward, rms_norm_operands(rms_norm_backward), true}};
    for (const Case& c : cases) {
      std::unique_ptr<Plan> plan;
      const Status status = plan_training_op(nullptr, c.op, &plan);
      ASSERT_TRUE(status.ok()) << op_name(c.op) << " " << dtype_name(dtype) << ": "
                               << status.message();
      ASSERT_EQ(plan->operands().size(), c.operands.size()) << op_name(c.op);
      for (std::size_t i = 0; i < c.operands.size(); ++i) {
        const OperandSpec &got = plan->operands()[i], &want = c.operands[i];
        EXPECT_EQ(got.name, want.name);
        EXPECT_EQ(got.dtype, want.dtype) << op_name(c.op) << " " << got.name;
        EXPECT_EQ(got.dims, want.dims);
        EXPECT_EQ(got.bytes, want.bytes);
        EXPECT_EQ(got.memory, want.memory) << op_name(c.op) << " " << got.name;
      }
      EXPECT_EQ(plan->workspace_bytes() > 0, c.needs_scratch) << op_name(c.op);
      EXPECT_NE(plan->implementation().find("CUDA"), std::string::npos);
    }
    // 16-bit batch norm and pooling keep their 4-D operands channels-last, like the
    // convolutions around them; the per-channel statistics are plain vectors.
    for (const OpDesc& op : {OpDesc(bn), OpDesc(bn_backward), OpDesc(bn_inference), OpDesc(pool)}) {
      std::unique_ptr<Plan> plan;
      ASSERT_TRUE(plan_training_op(nullptr, op, &plan).ok());
      const bool nhwc = dtype != DType::f32;
      EXPECT_NE(plan->implementation().find(nhwc ? "NHWC" : "NCHW"), std::string::npos)
          << plan->implementation();
      const auto& cuda_plan = static_cast<const CudaPlan&>(*plan);
      for (std::size_t i = 0; i < plan->operands().size(); ++i)
        EXPECT_EQ(cuda_plan.stored_channels_last(static_cast<int>(i)),
                  nhwc && plan->operands()[i].dims.size() == 4)
            << op_name(op) << " " << plan->operands()[i].name;
    }
    // The embedding's weight-table gradient is fp32 for bf16 data (fp32 master gradients).
    std::unique_ptr<Plan> plan;
    ASSERT_TRUE(plan_training_op(nullptr, embedding, &plan).ok());
    EXPECT_EQ(plan->operands().back().dtype, dtype == DType::bf16 ? DType::f32 : dtype);
  }
  for (OptimizerKind kind :
       {OptimizerKind::sgd_momentum, OptimizerKind::adamw, OptimizerKind::lamb}) {
    OptimizerOp op{kind, 1000, 7, DType::f32};
    std::unique_ptr<Plan> plan;
    ASSERT_TRUE(plan_training_op(nullptr, op, &plan).ok());
    EXPECT_EQ(plan->operands().back().memory, MemoryKind::host_pageable);  // hyper-parameters
    EXPECT_EQ(plan->workspace_bytes() > 0, kind == OptimizerKind::lamb);
  }
}

TEST(CudaTrainingPlans, WhatTheKernelsCannotDoIsRefusedWithAReason) {
  std::unique_ptr<Plan> plan;
  EltwiseOp f64{EltwiseKind::relu, Pass::forward, 10, DType::f64};
  Status status = plan_training_op(nullptr, f64, &plan);
  EXPECT_EQ(status.code(), StatusCode::unimplemented);
  EXPECT_NE(status.message().find("f64"), std::string::npos) << status.message();
  OptimizerOp bf16_state{OptimizerKind::adamw, 10, 1, DType::bf16};
  EXPECT_EQ(plan_training_op(nullptr, bf16_state, &plan).code(), StatusCode::unimplemented);
  DropoutOp certain{Pass::forward, 10, 1.0f, 0, DType::f32};
  EXPECT_EQ(plan_training_op(nullptr, certain, &plan).code(), StatusCode::invalid_argument);
  SoftmaxOp ragged{Pass::forward, 10, 4, 1.0f, true, 3, DType::f32};
  EXPECT_EQ(plan_training_op(nullptr, ragged, &plan).code(), StatusCode::invalid_argument);
  CastOp to_f64{10, DType::f32, DType::f64};
  EXPECT_EQ(plan_training_op(nullptr, to_f64, &plan).code(), StatusCode::unimplemented);
  EXPECT_FALSE(kernel_dtype(DType::i32));
}

}  // namespace
}  // namespace tb::cuda

#ifdef TRAINBENCH_HAVE_CUDNN
#include "backends/cuda/cudnn_attention.h"
#include "backends/cuda/cudnn_conv.h"
#include "backends/cuda/cudnn_norm.h"
#include "backends/reference/reference_backend.h"

namespace tb::cuda {
namespace {

// The engine filter: f32 strict, fp32 accumulation everywhere, Winograd only when allowed.
TEST(CudnnEngineChoice, NumericalNotesDecideWhichEnginesMayRun) {
  ConvOp op;
  std::string reason;
  EngineNotes tf32;  // cuDNN's fp32 engines on Tensor Cores carry the tensor-core note
  tf32.tensor_core = true;
  op.dtype = DType::f32;
  EXPECT_FALSE(engine_allowed(op, tf32, &reason));
  EXPECT_NE(reason.find("TF32"), std::string::npos) << reason;
  op.dtype = DType::tf32;
  EXPECT_TRUE(engine_allowed(op, tf32, &reason));
  EngineNotes down_convert;  // fp32 inputs converted to a 16-bit format: never
  down_convert.tensor_core = down_convert.down_convert = true;
  EXPECT_FALSE(engine_allowed(op, down_convert, &reason));
  EngineNotes half_accumulation;
  half_accumulation.reduced_precision_reduction = true;
  op.dtype = DType::f16;
  EXPECT_FALSE(engine_allowed(op, half_accumulation, &reason));
  EngineNotes winograd;
  winograd.winograd = true;
  op.dtype = DType::bf16;
  EXPECT_FALSE(engine_allowed(op, winograd, &reason));
  op.winograd_allowed = true;
  EXPECT_TRUE(engine_allowed(op, winograd, &reason));
  EXPECT_TRUE(engine_allowed(op, EngineNotes{}, &reason));
  EXPECT_EQ(EngineNotes{}.describe(), "none");
  EXPECT_EQ(down_convert.describe(), "tensor core, down-converts inputs");
}

// The cache key tells apart everything the engine depends on, and nothing else.
TEST(CudnnEngineChoice, KeysSeparateShapesDirectionsAndDtypes) {
  ConvOp base;
  base.mb = 8, base.ic = 64, base.ih = base.iw = 56, base.oc = 64, base.kh = base.kw = 3;
  base.ph = base.pw = 1;
  std::set<std::string> keys = {conv_engine_key(base)};
  auto differs = [&](auto change) {
    ConvOp op = base;
    change(op);
    return keys.insert(conv_engine_key(op)).second;
  };
  EXPECT_TRUE(differs([](ConvOp& o) { o.direction = ConvDirection::backward_data; }));
  EXPECT_TRUE(differs([](ConvOp& o) { o.direction = ConvDirection::backward_weights; }));
  EXPECT_TRUE(differs([](ConvOp& o) { o.dtype = DType::bf16; }));
  EXPECT_TRUE(differs([](ConvOp& o) { o.mb = 16; }));
  EXPECT_TRUE(differs([](ConvOp& o) { o.sh = o.sw = 2; }));
  EXPECT_TRUE(differs([](ConvOp& o) { o.ph = 0; }));
  EXPECT_TRUE(differs([](ConvOp& o) { o.winograd_allowed = true; }));
  // A validation-only network's untimed first choice never stands in for a searched engine.
  EXPECT_TRUE(differs([](ConvOp& o) { o.first_engine = true; }));
  EXPECT_FALSE(differs([](ConvOp& o) { o.layout = Layout::native; }));  // f32: NCHW in any layout
}

// A network's batch norms share a graph per shape: its key holds what the graph depends on, not
// epsilon or momentum (by value at execution) nor the fused ReLU (a kernel after it).
TEST(CudnnBatchNorm, GraphsAreKeyedByWhatTheyDependOn) {
  BatchNormOp base;
  base.mb = 32, base.channels = 64, base.h = base.w = 56, base.dtype = DType::bf16;
  std::set<std::string> keys = {batch_norm_graph_key(base)};
  auto differs = [&](auto change) {
    BatchNormOp op = base;
    change(op);
    return keys.insert(batch_norm_graph_key(op)).second;
  };
  EXPECT_FALSE(differs([](BatchNormOp& o) { o.epsilon = 1e-3f, o.momentum = 0.5f; }));
  EXPECT_FALSE(differs([](BatchNormOp& o) { o.fuse_relu = true; }));
  EXPECT_TRUE(differs([](BatchNormOp& o) { o.pass = Pass::backward; }));
  EXPECT_TRUE(differs([](BatchNormOp& o) { o.dtype = DType::f16; }));
  EXPECT_TRUE(differs([](BatchNormOp& o) { o.mb = 2; }));
  EXPECT_TRUE(differs([](BatchNormOp& o) { o.channels = 128; }));
  EXPECT_TRUE(differs([](BatchNormOp& o) { o.h = o.w = 28; }));
}

TEST(CudnnEngineChoice, TheFastestCandidateThatRanWins) {
  EXPECT_EQ(fastest_candidate({}), -1);
  EXPECT_EQ(fastest_candidate({-1, -1}), -1);  // none ran
  EXPECT_EQ(fastest_candidate({3e-4, -1, 2e-4, 5e-4}), 2);
  EXPECT_EQ(fastest_candidate({std::nan(""), 1e-3}), 1);
}

}  // namespace
}  // namespace tb::cuda
#endif

#include "backends/cuda/nhwc.h"

namespace tb::cuda {
namespace {

TEST(ChannelsLast, ConversionsRoundTripAndPlaceEveryValue) {
  const std::int64_t n = 2, c = 3, h = 4, w = 5;
  std::vector<std::uint16_t> plain(n * c * h * w), nhwc(plain.size()), back(plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<std::uint16_t>(i);
  nchw_to_nhwc(plain.data(), nhwc.data(), n, c, h, w, sizeof(std::uint16_t));
  // Element (1, 2, 3, 4) of NCHW sits at ((1 * h + 3) * w + 4) * c + 2 in NHWC.
  EXPECT_EQ(nhwc[((1 * h + 3) * w + 4) * c + 2], plain[((1 * c + 2) * h + 3) * w + 4]);
  nhwc_to_nchw(nhwc.data(), back.data(), n, c, h, w, sizeof(std::uint16_t));
  EXPECT_EQ(back, plain);
}

// Every element size a dtype has, on a tensor large enough to run on every thread.
TEST(ChannelsLast, ConversionsOfEveryElementSizeRoundTripOnEveryThread) {
  const std::int64_t n = 3, c = 37, h = 41, w = 43;
  const std::size_t count = static_cast<std::size_t>(n * c * h * w);
  for (const std::size_t element : {1, 2, 4, 8}) {
    std::vector<unsigned char> plain(count * element), nhwc(plain.size()), back(plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i)
      plain[i] = static_cast<unsigned char>(mix64(i) >> 56);
    nchw_to_nhwc(plain.data(), nhwc.data(), n, c, h, w, element);
    const std::size_t at = ((2 * c + 36) * h + 40) * w + 1, to = ((2 * h + 40) * w + 1) * c + 36;
    EXPECT_EQ(std::memcmp(&nhwc[to * element], &plain[at * element], element), 0) << element;
    nhwc_to_nchw(nhwc.data(), back.data(), n, c, h, w, element);
    EXPECT_EQ(back, plain) << element;
  }
}

// A plan's stored offset of a plain position is where the conversion put that element: what
// the device-side gather of sampled values reads. Operands that do not convert map to
// themselves.
TEST(ChannelsLast, StoredOffsetsAreWhereTheConversionPutsEachElement) {
  struct ChannelsLastPlan final : CudaPlan {
    ChannelsLastPlan() {
      channels_last_ = true;
      operands_ = {{.name = "src", .dtype = DType::bf16, .dims = {2, 3, 4, 5}, .bytes = 240},
                   {.name = "pooled", .dtype = DType::bf16, .dims = {2, 3, 1, 1}, .bytes = 12},
                   {.name = "table", .dtype = DType::bf16, .dims = {6, 7}, .bytes = 84}};
    }
    Status run(std::span<const Buffer>, Buffer, cudaStream_t) override { return Status::Ok(); }
  } plan;
  std::vector<std::uint16_t> plain(120), nhwc(120);
  for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<std::uint16_t>(i);
  nchw_to_nhwc(plain.data(), nhwc.data(), 2, 3, 4, 5, sizeof(std::uint16_t));
  std::set<std::int64_t> offsets;
  for (std::int64_t p = 0; p < 120; ++p) {
    const std::int64_t stored = plan.stored_offset(0, p);
    ASSERT_TRUE(stored >= 0 && stored < 120) << p;
    EXPECT_EQ(nhwc[static_cast<std::size_t>(stored)], plain[static_cast<std::size_t>(p)]) << p;
    offsets.insert(stored);
  }
  EXPECT_EQ(offsets.size(), 120u);
  EXPECT_NE(plan.stored_offset(0, 1), 1);
  for (const int index : {1, 2})
    for (std::int64_t p = 0; p < 6; ++p) EXPECT_EQ(plan.stored_offset(index, p), p);
}

// 16-bit activations are channels-last unless the caller asks for plain NCHW; fp32 and tf32
// stay NCHW.
TEST(ChannelsLast, SixteenBitActivationsAreChannelsLastUnlessPlainIsAsked) {
  for (Layout layout : {Layout::any, Layout::native}) {
    EXPECT_TRUE(channels_last(DType::bf16, layout));
    EXPECT_TRUE(channels_last(DType::f16, layout));
    EXPECT_FALSE(channels_last(DType::f32, layout));
    EXPECT_FALSE(channels_last(DType::tf32, layout));
  }
  EXPECT_FALSE(channels_last(DType::bf16, Layout::plain));
}

// Every element has one offset in each layout, and its channel and coordinates come back
// from it: what the batch-norm and pooling kernels index by.
TEST(ChannelsLast, ShapesPlaceAndFindEveryElementInBothLayouts) {
  for (bool nhwc : {false, true}) {
    const ActivationShape shape{2, 3, 4, 5, nhwc};
    std::set<std::int64_t> offsets;
    for (std::int64_t n = 0; n < shape.n; ++n)
      for (std::int64_t c = 0; c < shape.c; ++c)
        for (std::int64_t y = 0; y < shape.h; ++y)
          for (std::int64_t x = 0; x < shape.w; ++x) {
            const std::int64_t o = shape.offset(n, c, y, x);
            offsets.insert(o);
            EXPECT_EQ(shape.channel(o), c);
            const ActivationShape::Coordinates p = shape.coordinates(o);
            EXPECT_EQ(p.n, n);
            EXPECT_EQ(p.c, c);
            EXPECT_EQ(p.y, y);
            EXPECT_EQ(p.x, x);
          }
    EXPECT_EQ(offsets.size(), 120u);
    EXPECT_EQ(*offsets.rbegin(), 119);
  }
}

#ifdef TRAINBENCH_HAVE_CUDNN
TEST(CudnnEngineChoice, SixteenBitConvolutionsGoChannelsLast) {
  ConvOp op;
  op.dtype = DType::bf16;
  EXPECT_TRUE(conv_channels_last(op));  // Layout::any: a single-op benchmark imports KRSC
  EXPECT_FALSE(conv_stages_weights(op));
  op.layout = Layout::native;  // a network's step: NHWC like its other ops, weights plain
  EXPECT_TRUE(conv_channels_last(op));
  EXPECT_TRUE(conv_stages_weights(op));
  op.layout = Layout::plain;  // asked for NCHW
  EXPECT_FALSE(conv_channels_last(op));
  EXPECT_FALSE(conv_stages_weights(op));
  op.layout = Layout::native, op.dtype = DType::f32;
  EXPECT_FALSE(conv_channels_last(op));
  EXPECT_FALSE(conv_stages_weights(op));
  ConvOp a, b;
  a.dtype = b.dtype = DType::f16, b.layout = Layout::plain;
  EXPECT_NE(conv_engine_key(a), conv_engine_key(b));
  b = a, b.layout = Layout::native;  // the same tensors for cuDNN: one search
  EXPECT_EQ(conv_engine_key(a), conv_engine_key(b));
  b = a, b.epilogue = ConvEpilogue::bias_relu;  // a fused graph is another search
  EXPECT_NE(conv_engine_key(a), conv_engine_key(b));
}

// cuDNN's batch norm is tried for channels-last 16-bit training steps; inference and other
// layouts keep the own kernels, with the reason.
TEST(CudnnBatchNorm, TriedWhereItsEnginesApply) {
  BatchNormOp op;
  op.mb = 8, op.channels = 64, op.h = op.w = 14, op.dtype = DType::bf16;
  EXPECT_EQ(cudnn_batch_norm_skip_reason(op), "");
  op.pass = Pass::backward, op.fuse_relu = true;
  EXPECT_EQ(cudnn_batch_norm_skip_reason(op), "");
  op.dtype = DType::f16;
  EXPECT_EQ(cudnn_batch_norm_skip_reason(op), "");
  BatchNormOp other = op;
  other.inference = true;
  EXPECT_NE(cudnn_batch_norm_skip_reason(other), "");
  other = op, other.dtype = DType::f32;
  EXPECT_NE(cudnn_batch_norm_skip_reason(other), "");
  other = op, other.layout = Layout::plain;
  EXPECT_NE(cudnn_batch_norm_skip_reason(other), "");
  std::unique_ptr<Plan> plan;  // refused before any cuDNN call: no handle needed
  NormGraphCache cache;
  EXPECT_EQ(plan_cudnn_batch_norm(nullptr, cache, other, &plan).code(), StatusCode::unimplemented);
}

// On a GPU (skipped without one): a bf16 channels-last training batch norm runs cuDNN's node,
// and everything it writes matches the f64 op, the running statistics included (a training
// step's op check cannot see those: they are updated in place); then its backward.
TEST(CudnnBatchNorm, OnAGpuItMatchesTheDoublePrecisionOpRunningStatisticsIncluded) {
  auto gpu = make_backend("cuda");
  if (!gpu) GTEST_SKIP() << "cuda is not in this build or not usable here";
  auto cpu = make_cpu_backend();
  ASSERT_TRUE(cpu);
  BatchNormOp op;
  op.mb = 4, op.channels = 32, op.h = op.w = 14, op.fuse_relu = true, op.dtype = DType::bf16;
  BatchNormOp reference = op;
  reference.dtype = DType::f64, reference.layout = Layout::plain;
  for (Pass pass : {Pass::forward, Pass::backward}) {
    op.pass = reference.pass = pass;
    std::unique_ptr<Plan> plan;
    ASSERT_TRUE(gpu->plan(op, &plan).ok());
    EXPECT_NE(plan->implementation().find("cuDNN batch norm"), std::string::npos)
        << plan->implementation();
  }
  const std::int64_t n = op.mb * op.channels * op.h * op.w, c = op.channels;
  std::vector<double> x = random(n, 21), dy = random(n, 22);
  for (double& v : x) v = cpu::round_to_bf16(static_cast<float>(3 * v + 1));  // as stored
  for (double& v : dy) v = cpu::round_to_bf16(static_cast<float>(v));
  const std::vector<double> gamma = random(c, 23), beta = random(c, 24), data(n), channel(c);
  const std::vector<double> running_mean(c, 0.25), running_var(c, 2.0);
  op.pass = reference.pass = Pass::forward;
  const std::vector<std::vector<double>> inputs = {x,       gamma,   beta,         data,
                                                   channel, channel, running_mean, running_var};
  const auto got = run_op(*gpu, op, inputs), want = run_op(*cpu, reference, inputs);
  ASSERT_EQ(got.size(), want.size());
  // dst in bf16; mean, variance and both running statistics in fp32.
  EXPECT_LT(relative_l2_error(got[3], want[3]), 1e-2);
  for (int i : {4, 5, 6, 7}) EXPECT_LT(relative_l2_error(got[i], want[i]), 1e-4) << i;
  std::int64_t masks_differ = 0;
  for (std::int64_t i = 0; i < n; ++i) masks_differ += got[8][i] != want[8][i];
  EXPECT_LT(masks_differ, n / 100);  // only where bf16 rounding moves y across 0

  op.pass = reference.pass = Pass::backward;  // from the reference's statistics and mask
  const std::vector<std::vector<double>> backward = {x, dy, gamma, beta, want[4], want[5], want[8]};
  const auto got_grads = run_op(*gpu, op, backward);
  const auto want_grads = run_op(*cpu, reference, backward);
  for (int i : {7, 8, 9})  // diff_src (bf16), diff_gamma, diff_beta (fp32 sums of bf16 data)
    EXPECT_LT(relative_l2_error(got_grads[i], want_grads[i]), 1e-2) << i;
}

// cuDNN's fused attention reads queries, keys and values where the unfused path's attention
// GEMMs read them (head-interleaved, as the projections write them).
TEST(CudnnAttention, TensorsDescribeTheInterleavedLayoutTheGemmsRead) {
  AttentionOp op;
  op.batch = 3, op.heads = 4, op.sequence = 5, op.head_dim = 8, op.dtype = DType::bf16;
  const TensorSpec tensor = interleaved_attention_tensor(7, op);
  EXPECT_EQ(tensor.uid, 7);
  EXPECT_EQ(tensor.dims, (std::vector<std::int64_t>{3, 4, 5, 8}));  // cuDNN's b, h, s, d
  GemmOp scores;  // the unfused scores GEMM: A = Q [s x d] per (batch, head), interleaved
  scores.batch = op.batch, scores.heads = op.heads, scores.m = op.sequence, scores.n = op.sequence;
  scores.k = op.head_dim, scores.trans_b = true, scores.a_interleaved = true;
  const GemmOperandLayout q = gemm_layout(scores, GemmOperand::a);
  EXPECT_EQ(tensor.strides, (std::vector<std::int64_t>{q.batch, q.head, q.row, q.col}));
  // ... which is the [batch, sequence, heads, head_dim] order the operands declare.
  const std::vector<OperandSpec> operands = attention_operands(op);
  const OperandSpec& queries = operands[operand_index(operands, "q")];
  const OperandSpec& stats = operands[operand_index(operands, "stats")];
  EXPECT_EQ(queries.dims, (std::vector<std::int64_t>{3, 5, 4, 8}));
  EXPECT_EQ(stats.dtype, DType::f32);
}

// The backward is cudnn-frontend's composite graph (its 24 nodes for padding, no dropout, no
// causal mask): every node finalizes without a GPU, cuDNN checking its tensors, and the
// frontend's workspace (the fp32 dQ accumulator, then D) comes before the engine's.
TEST(CudnnAttention, TheBackwardIsTheFrontendsCompositeGraph) {
  AttentionOp op;
  op.batch = 2, op.heads = 4, op.sequence = 128, op.head_dim = 64, op.dtype = DType::bf16;
  op.pass = Pass::backward;
  std::size_t nodes = 0;
  const Status status = finalize_backward_nodes(op, &nodes);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(nodes, 24u);
  const AttentionWorkspace workspace = attention_backward_workspace(op);
  EXPECT_EQ(workspace.softmax_sum_offset, 2u * 4 * 128 * 64 * 4);  // dQ in fp32
  EXPECT_EQ(workspace.engine_offset, workspace.softmax_sum_offset + 2u * 4 * 128 * 4);
  op.dtype = DType::f16;
  EXPECT_TRUE(finalize_backward_nodes(op, &nodes).ok());
  op.head_dim = -8;  // a tensor cuDNN refuses: the node that holds it says so
  EXPECT_FALSE(finalize_backward_nodes(op, &nodes).ok());
}

// On a GPU (skipped without one): RMSNorm's kernels, both passes, against the f64 op on the
// same (rounded) inputs, to the dtype's rounding.
TEST_F(CudaTrainingMath, OnAGpuRmsNormMatchesTheDoublePrecisionOp) {
  auto gpu = make_backend("cuda");
  if (!gpu) GTEST_SKIP() << "cuda is not in this build or not usable here";
  for (const auto& [dtype, tolerance] : {std::pair{DType::f32, 1e-5}, {DType::bf16, 1e-2}}) {
    RmsNormOp op{Pass::forward, 33, 300, 1e-5f, dtype}, exact = op;
    exact.dtype = DType::f64;
    const std::size_t n = 33 * 300;
    std::vector<double> x = random(n, 31), dy = random(n, 32);
    const std::vector<double> gamma = random(300, 33);
    for (double& v : x) v = static_cast<double>(cpu::round_to_bf16(static_cast<float>(v)));
    for (double& v : dy) v = static_cast<double>(cpu::round_to_bf16(static_cast<float>(v)));
    const auto specs = rms_norm_operands(op);
    auto at = [](const std::vector<OperandSpec>& list, const char* name) {
      return static_cast<std::size_t>(operand_index(list, name));
    };
    const auto want = run_op(*cpu_, exact, {x, gamma});
    const auto got = run_op(*gpu, op, {x, gamma});
    for (const char* name : {"dst", "inverse_rms"})
      EXPECT_LT(relative_l2_error(got.at(at(specs, name)), want.at(at(specs, name))), tolerance)
          << dtype_name(dtype) << " " << name;
    op.pass = exact.pass = Pass::backward;
    const auto back = rms_norm_operands(op);
    const std::vector<double>& inverse_rms = want.at(at(specs, "inverse_rms"));
    const auto want_grads = run_op(*cpu_, exact, {x, dy, gamma, inverse_rms});
    const auto got_grads = run_op(*gpu, op, {x, dy, gamma, inverse_rms});
    for (const char* name : {"diff_src", "diff_gamma"})
      EXPECT_LT(relative_l2_error(got_grads.at(at(back, name)), want_grads.at(at(back, name))),
                tolerance)
          << dtype_name(dtype) << " " << name;
  }
}

// On a GPU (skipped without one): copies through the pinned halves come back byte for byte,
// whatever the size against the direct limit and the chunks (one, an odd part, several).
TEST(StagedCopies, OnAGpuEverySizeRoundTrips) {
  auto gpu = make_backend("cuda");
  if (!gpu) GTEST_SKIP() << "cuda is not in this build or not usable here";
  StagedCopy staging;
  for (const std::size_t bytes :
       {std::size_t{1000}, StagedCopy::kDirectBytes, StagedCopy::kChunkBytes,
        2 * StagedCopy::kChunkBytes + 3, 5 * StagedCopy::kChunkBytes / 2}) {
    std::vector<unsigned char> sent(bytes), back(bytes);
    for (std::size_t i = 0; i < bytes; ++i) sent[i] = static_cast<unsigned char>(mix64(i) >> 56);
    Buffer device;
    ASSERT_TRUE(gpu->allocate(bytes, &device).ok());
    ASSERT_TRUE(staging.to_device(device.data, sent.data(), bytes).ok()) << bytes;
    ASSERT_TRUE(staging.to_host(back.data(), device.data, bytes).ok()) << bytes;
    EXPECT_EQ(back, sent) << bytes;
    gpu->release(device);
  }
}

// On a GPU (skipped without one): a device fill of a plain operand holds counter_values'
// values, rounded to the operand's dtype as the host would; an f64 operand is the host's.
TEST(SeededFills, OnAGpuAPlainOperandHoldsTheHostsCounterValues) {
  auto gpu = make_backend("cuda");
  if (!gpu) GTEST_SKIP() << "cuda is not in this build or not usable here";
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const GemmOp op{.m = 64, .n = 48, .k = 40, .a_type = dtype, .b_type = dtype, .c_type = dtype};
    std::unique_ptr<Plan> plan;
    ASSERT_TRUE(gpu->plan(op, &plan).ok()) << dtype_name(dtype);
    const int index = operand_index(plan->operands(), "a");
    const OperandSpec& a = plan->operands()[static_cast<std::size_t>(index)];
    Buffer buffer;
    ASSERT_TRUE(gpu->allocate(a.bytes, &buffer).ok());
    ASSERT_TRUE(gpu->fill_operand(*plan, index, buffer, 77).ok()) << dtype_name(dtype);
    std::vector<unsigned char> bytes(a.elements() * dtype_size(dtype));
    ASSERT_TRUE(gpu->export_operand(*plan, index, buffer, bytes.data()).ok());
    const std::vector<float> want = counter_values(a.elements(), 77, dtype);
    for (std::size_t i = 0; i < want.size(); ++i) {
      float got = 0;
      std::uint16_t bits = 0;
      if (dtype == DType::f32) {
        std::memcpy(&got, &bytes[4 * i], 4);
      } else {
        std::memcpy(&bits, &bytes[2 * i], 2);
        got = dtype == DType::bf16 ? cpu::bf16_to_float(bits) : cpu::f16_to_float(bits);
      }
      ASSERT_EQ(got, want[i]) << dtype_name(dtype) << " element " << i;
    }
    gpu->release(buffer);
  }
}

// On a GPU (skipped without one): each pass of cuDNN's fused attention plans alone (a refusal
// says "fused attention forward" or "backward") and matches the f64 op, a padded sequence and its
// masked keys included.
TEST(CudnnAttention, OnAGpuEachPassPlansAloneAndMatchesTheDoublePrecisionOp) {
  auto gpu = make_backend("cuda");
  if (!gpu) GTEST_SKIP() << "cuda is not in this build or not usable here";
  auto reference = cpu::make_host_reference_backend();
  AttentionOp op;
  op.batch = 2, op.heads = 2, op.sequence = 64, op.head_dim = 64, op.scale = 0.125f;
  op.dtype = DType::bf16;
  AttentionOp exact = op;
  exact.dtype = DType::f64;
  const std::size_t count = static_cast<std::size_t>(op.batch * op.sequence * op.heads * 64);
  std::vector<std::vector<double>> inputs = {testing_support::random(count, 1),
                                             testing_support::random(count, 2),
                                             testing_support::random(count, 3),
                                             {64, 40}};
  for (int i = 0; i < 3; ++i)  // the f64 op reads what the GPU reads: bf16 values
    inputs[i] = from_bytes(to_bytes(inputs[i], DType::bf16).data(), count, DType::bf16);
  const auto got = testing_support::run_op(*gpu, op, inputs);
  const auto want = testing_support::run_op(*reference, exact, inputs);
  ASSERT_EQ(got.size(), 6u) << "the forward did not plan";
  EXPECT_LT(relative_l2_error(got[4], want[4]), 1e-2);  // out, rounded to bf16
  EXPECT_LT(relative_l2_error(got[5], want[5]), 1e-4);  // log-sum-exp statistics, fp32
  op.pass = exact.pass = Pass::backward;
  inputs.push_back(want[4]);
  inputs.push_back(want[5]);
  inputs.push_back(testing_support::random(count, 4));
  for (std::size_t i = 4; i < inputs.size(); i += 2)  // out and diff_out, as the GPU reads them
    inputs[i] = from_bytes(to_bytes(inputs[i], DType::bf16).data(), count, DType::bf16);
  const auto got_grads = testing_support::run_op(*gpu, op, inputs);
  const auto want_grads = testing_support::run_op(*reference, exact, inputs);
  ASSERT_EQ(got_grads.size(), 10u) << "the backward did not plan";
  for (int i : {7, 8, 9})  // diff_q, diff_k, diff_v in bf16
    EXPECT_LT(relative_l2_error(got_grads[i], want_grads[i]), 2e-2) << i;
}

TEST(CudnnAttention, WhatCudnnCannotRunIsRefusedWithAReason) {
  AttentionOp op;
  op.head_dim = 64, op.dtype = DType::bf16;
  EXPECT_EQ(attention_unsupported_reason(op, 91900, 90), "");
  op.dtype = DType::f16;
  EXPECT_EQ(attention_unsupported_reason(op, kCudnnSdpaVersion, 80), "");
  EXPECT_NE(attention_unsupported_reason(op, 91600, 90).find("9.16 has no SDPA"),
            std::string::npos);
  op.dtype = DType::f32;
  EXPECT_NE(attention_unsupported_reason(op, 91900, 90).find("bf16 and f16"), std::string::npos);
  op.dtype = DType::bf16, op.head_dim = 12;
  EXPECT_NE(attention_unsupported_reason(op, 91900, 90).find("multiple of 8"), std::string::npos);
  op.head_dim = 256;  // Hopper's limit; Ampere's backward stops at 128
  EXPECT_EQ(attention_unsupported_reason(op, 91900, 90), "");
  EXPECT_NE(attention_unsupported_reason(op, 91900, 80).find("at most 128"), std::string::npos);
  op.head_dim = 512;
  EXPECT_FALSE(attention_unsupported_reason(op, 91900, 90).empty());
}
#endif

}  // namespace
}  // namespace tb::cuda

#include "backends/cuda/cublaslt_gemm.h"

namespace tb::cuda {
namespace {

// cuBLASLt's matmul as documented, on the host: D = alpha op(A) op(B) + beta C with
// column-major matrices, strided batches and the calls lt_gemm_shape() asks for, fed this
// op's row-major buffers (cuBLASLt's A is this op's B).
void emulate_cublaslt(const GemmOp& op, const LtGemmShape& s, const std::vector<double>& a,
                      const std::vector<double>& b, std::vector<double>& c) {
  const std::int64_t rows = s.output.rows, cols = s.output.cols;
  const std::int64_t depth = s.first.transposed ? s.first.rows : s.first.cols;
  for (std::int64_t call = 0; call < s.calls; ++call)
    for (std::int64_t t = 0; t < s.count; ++t) {
      const double* first = b.data() + call * s.call_stride[1] + t * s.first.batch_stride;
      const double* second = a.data() + call * s.call_stride[0] + t * s.second.batch_stride;
      double* out = c.data() + call * s.call_stride[2] + t * s.output.batch_stride;
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j) {
          double sum = 0;
          for (std::int64_t p = 0; p < depth; ++p) {
            const double x =
                s.first.transposed ? first[p + i * s.first.ld] : first[i + p * s.first.ld];
            const double y =
                s.second.transposed ? second[j + p * s.second.ld] : second[p + j * s.second.ld];
            sum += x * y;
          }
          double& d = out[i + j * s.output.ld];
          d = op.alpha * sum + op.beta * d;
        }
    }
}

// Every layout the GEMM op takes (transposes, batches, attention's head-interleaved operands)
// mapped onto cuBLASLt gives what the shared f64 GEMM gives: the mapping is right before any
// GPU runs it.
TEST(CublasLtMapping, RowMajorOperandsMapOntoColumnMajorBatches) {
  auto cpu = make_cpu_backend();
  if (!cpu) GTEST_SKIP() << "no CPU backend in this build";
  std::vector<GemmOp> cases;
  GemmOp base;
  base.m = 5, base.n = 7, base.k = 3, base.a_type = base.b_type = base.c_type = DType::f64;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      GemmOp op = base;
      op.trans_a = ta, op.trans_b = tb, op.batch = ta ? 3 : 1, op.alpha = 0.5, op.beta = 0.25;
      cases.push_back(op);
    }
  GemmOp attention = base;  // BERT's scores, context and their gradients (training_step.cpp)
  attention.batch = 2, attention.heads = 3, attention.m = 4, attention.n = 4, attention.k = 2;
  GemmOp scores = attention;
  scores.trans_b = true, scores.a_interleaved = scores.b_interleaved = true;
  GemmOp dq = attention;
  dq.n = 2, dq.k = 4, dq.b_interleaved = dq.c_interleaved = true;
  GemmOp dk = dq;
  dk.trans_a = true;
  GemmOp context = attention;
  context.n = 2, context.k = 4, context.b_interleaved = context.c_interleaved = true;
  GemmOp dp = context;
  dp.n = 4, dp.k = 2, dp.trans_b = true, dp.a_interleaved = dp.b_interleaved = true,
  dp.c_interleaved = false;
  GemmOp dv = context;
  dv.trans_a = true;
  cases.insert(cases.end(), {scores, dq, dk, context, dp, dv, attention});
  int seed = 0;
  for (const GemmOp& op : cases) {
    const std::vector<OperandSpec> specs = gemm_operands(op);
    auto elements = [&](const char* name) { return specs[operand_index(specs, name)].elements(); };
    const std::vector<double> a = random(elements("a"), ++seed), b = random(elements("b"), ++seed),
                              c0 = random(elements("c"), ++seed);
    // run_op takes and returns values in the declared order: a, b, c.
    const std::vector<double> want = run_op(*cpu, op, {a, b, c0}).at(operand_index(specs, "c"));
    std::vector<double> got = c0;
    const LtGemmShape shape = lt_gemm_shape(op);
    emulate_cublaslt(op, shape, a, b, got);
    EXPECT_LT(relative_l2_error(got, want), 1e-14)
        << "m " << op.m << " n " << op.n << " k " << op.k << " ta " << op.trans_a << " tb "
        << op.trans_b << " batch " << op.batch << " heads " << op.heads << " interleaved "
        << op.a_interleaved << op.b_interleaved << op.c_interleaved;
  }
  EXPECT_EQ(lt_gemm_shape(scores).calls, 2);  // interleaved: one call per sequence
  EXPECT_EQ(lt_gemm_shape(cases[1]).calls, 1);
}

// A fully connected layer's bias epilogues as cuBLASLt documents them, on the host (BIAS: one
// value per row of the column-major D, added along its columns; BGRADB: cuBLASLt's B, after
// its transpose, summed over k, one value per column of D), on the GEMMs the layer runs, give
// the shared f64 layer's output and bias gradient.
TEST(CublasLtMapping, BiasEpiloguesAreTheLayersBiasAndItsGradient) {
  auto cpu = make_cpu_backend();
  if (!cpu) GTEST_SKIP() << "no CPU backend in this build";
  FullyConnectedOp fc;
  fc.mb = 6, fc.in = 5, fc.out = 4, fc.dtype = DType::f64;
  const std::vector<double> x = random(30, 1), w = random(20, 2), bias = random(4, 3),
                            dy = random(24, 4);

  const GemmOp forward = fully_connected_gemm(fc);
  OperandSpec spec;
  ASSERT_TRUE(epilogue_operand(forward, LtEpilogue::bias, &spec).ok());
  EXPECT_EQ(spec.dims, std::vector<std::int64_t>{fc.out});
  EXPECT_FALSE(spec.is_output);
  const LtGemmShape shape = lt_gemm_shape(forward);
  std::vector<double> y(24, 0.0);
  emulate_cublaslt(forward, shape, x, w, y);
  for (std::int64_t i = 0; i < shape.output.rows; ++i)
    for (std::int64_t j = 0; j < shape.output.cols; ++j) y[i + j * shape.output.ld] += bias[i];
  EXPECT_LT(relative_l2_error(y, run_op(*cpu, fc, {x, w, bias}).at(3)), 1e-14);

  fc.direction = ConvDirection::backward_weights;
  const GemmOp weights = fully_connected_gemm(fc);
  ASSERT_TRUE(epilogue_operand(weights, LtEpilogue::bias_gradient, &spec).ok());
  EXPECT_EQ(spec.dims, std::vector<std::int64_t>{fc.out});
  EXPECT_EQ(spec.dtype, DType::f32);  // fp32 master gradients
  EXPECT_TRUE(spec.is_output);
  const LtGemmShape s = lt_gemm_shape(weights);
  const std::int64_t depth = s.second.transposed ? s.second.cols : s.second.rows;
  std::vector<double> bias_gradient(static_cast<std::size_t>(s.output.cols), 0.0);
  for (std::int64_t j = 0; j < s.output.cols; ++j)
    for (std::int64_t p = 0; p < depth; ++p)  // cuBLASLt's B is this GEMM's A: diff_dst
      bias_gradient[j] += s.second.transposed ? dy[j + p * s.second.ld] : dy[p + j * s.second.ld];
  EXPECT_LT(relative_l2_error(bias_gradient, run_op(*cpu, fc, {x, dy}).at(3)), 1e-14);

  GemmOp batched = forward;
  batched.batch = 2;
  EXPECT_EQ(epilogue_operand(batched, LtEpilogue::bias, &spec).code(), StatusCode::unimplemented);
}

}  // namespace
}  // namespace tb::cuda
