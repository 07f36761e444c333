// The op-by-op check of a training step: sampled products agree with the full f64 ops, the
// check covers the weight casts and the update, and damage to a sampled product, a cast or
// the update fails it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <tuple>

#include "backends/low_precision.h"
#include "backends/operands.h"
#include "backends/reference/reference_backend.h"
#include "models/bert.h"
#include "models/resnet.h"
#include "models/sampled_reference.h"
#include "tests/forwarding_backend.h"
#include "tests/models/support.h"

namespace tb {
namespace {

// --- Sampled elements against the whole f64 op ---------------------------------------------

struct SampledCase {
  const char* name;
  OpDesc op;
};

ConvOp conv(ConvDirection direction, ConvEpilogue epilogue = ConvEpilogue::none) {
  ConvOp op;
  op.direction = direction, op.epilogue = epilogue, op.dtype = DType::f64;
  op.layout = Layout::plain;
  op.mb = 2, op.ic = 3, op.ih = 9, op.iw = 7, op.oc = 5, op.kh = 3, op.kw = 2;
  op.sh = 2, op.sw = 1, op.ph = 1, op.pw = 1;
  return op;
}

FullyConnectedOp fully_connected(ConvDirection direction) {
  FullyConnectedOp op;
  op.direction = direction, op.dtype = DType::f64, op.mb = 3, op.in = 7, op.out = 5;
  return op;
}

GemmOp gemm(bool trans_a, bool trans_b, bool interleaved) {
  GemmOp op;
  op.m = 4, op.n = 6, op.k = 5, op.trans_a = trans_a, op.trans_b = trans_b, op.alpha = 0.5f;
  op.a_type = op.b_type = op.c_type = DType::f64;
  op.batch = 2, op.heads = 3;
  op.a_interleaved = op.c_interleaved = interleaved;
  return op;
}

class SampledReference : public ::testing::TestWithParam<SampledCase> {};

TEST_P(SampledReference, AgreesWithTheFullF64Op) {
  const std::unique_ptr<Backend> host = cpu::make_host_reference_backend();
  const OpDesc& op = GetParam().op;
  std::unique_ptr<Plan> plan;
  ASSERT_TRUE(host->plan(op, &plan).ok());
  const std::vector<OperandSpec> specs = plan->operands();
  std::vector<std::vector<double>> inputs(specs.size());
  std::vector<std::vector<double>> leading;
  for (std::size_t i = 0; i < specs.size() && !specs[i].is_output; ++i) {
    inputs[i] = testing_support::random(static_cast<std::size_t>(specs[i].elements()), 40 + i);
    leading.push_back(inputs[i]);
  }
  const std::vector<std::vector<double>> all = testing_support::run_op(*host, op, leading);
  ASSERT_EQ(all.size(), specs.size());
  int outputs = 0;
  for (std::size_t o = 0; o < specs.size(); ++o) {
    if (!specs[o].is_output) continue;
    ++outputs;
    const SampledOutput sampled =
        sample_reference(op, specs[o].name, OperandValues(specs, inputs), 200, 5);
    ASSERT_EQ(sampled.index.size(), 200u) << specs[o].name;
    for (std::size_t s = 0; s < sampled.index.size(); ++s) {
      const double want = all[o].at(static_cast<std::size_t>(sampled.index[s]));
      EXPECT_NEAR(sampled.value[s], want, 1e-12 * std::max(1.0, sampled.magnitude[s]))
          << specs[o].name << " element " << sampled.index[s];
      EXPECT_GE(sampled.magnitude[s], std::fabs(sampled.value[s]) - 1e-12);
    }
  }
  EXPECT_GT(outputs, 0);
  EXPECT_TRUE(has_sampled_reference(op));
  EXPECT_GT(multiply_adds(op), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Products, SampledReference,
    ::testing::Values(
        SampledCase{"conv_forward", conv(ConvDirection::forward)},
        SampledCase{"conv_forward_bias_relu",
                    conv(ConvDirection::forward, ConvEpilogue::bias_relu)},
        SampledCase{"conv_backward_data", conv(ConvDirection::backward_data)},
        SampledCase{"conv_backward_weights", conv(ConvDirection::backward_weights)},
        SampledCase{"fc_forward", fully_connected(ConvDirection::forward)},
        SampledCase{"fc_backward_data", fully_connected(ConvDirection::backward_data)},
        SampledCase{"fc_backward_weights", fully_connected(ConvDirection::backward_weights)},
        SampledCase{"gemm", gemm(false, false, false)},
        SampledCase{"gemm_transposed_interleaved", gemm(true, true, true)}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(SampledReferenceScope, ProductsOnlyAndNotWhenCIsRead) {
  GemmOp accumulating = gemm(false, false, false);
  accumulating.beta = 1;
  EXPECT_FALSE(has_sampled_reference(accumulating));
  EXPECT_FALSE(has_sampled_reference(BatchNormOp{}));
  EXPECT_EQ(multiply_adds(BatchNormOp{}), 0);
}

// A NaN error names its output as the worst: the failure message must point at what failed.
TEST(OpCheckWorst, ANanErrorIsTheWorstThereIs) {
  OpCheck check;
  check.add_output(0.5, 1, "passed");
  check.add_output(NAN, 1, "failed with NaN");
  check.add_output(5, 1, "five times over");
  EXPECT_EQ(check.worst_output, "failed with NaN");
  EXPECT_EQ(check.outputs_compared, 3);
  OpCheck tolerance_nan;
  tolerance_nan.add_output(2, 1, "twice over");
  tolerance_nan.add_output(0, NAN, "NaN tolerance");
  EXPECT_EQ(tolerance_nan.worst_output, "NaN tolerance");
}

// --- The step's check, undamaged and damaged -------------------------------------------------

// Runs every op for real, then lets `damage` change what it wrote (or skip it).
class DamagingBackend final : public testing_support::ForwardingBackend {
 public:
  // Returns true when it ran the op itself (or chose not to run it).
  using Damage = std::function<bool(Backend&, Plan&, std::span<const Buffer>, Buffer)>;
  DamagingBackend(Backend& real, Damage damage) : ForwardingBackend(real), damage_(damage) {}
  Status execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) override {
    if (damage_ && damage_(real_, plan, operands, workspace)) return Status::Ok();
    return real_.execute(plan, operands, workspace);
  }

 private:
  Damage damage_;
};

bool operands_named(const Plan& plan, std::initializer_list<const char*> names) {
  if (plan.operands().size() != names.size()) return false;
  std::size_t i = 0;
  for (const char* name : names)
    if (plan.operands()[i++].name != name) return false;
  return true;
}

// The margin a damage (or its absence) leaves, for the log.
void print_margin(const char* what, const OpCheck& check) {
  std::printf("%s: %lld ops (%lld sampled), worst %.3g = %.3g x allowed, at %s\n", what,
              static_cast<long long>(check.ops_checked), static_cast<long long>(check.ops_sampled),
              check.worst_error, check.worst_error / check.worst_tolerance,
              check.worst_output.c_str());
}

// The update checked in full, and as a full-size model's is: by tensors (and every product
// sampled).
std::vector<OpCheckOptions> both_ways() {
  return {{.update = OptimizerSettings{}},
          {.full_reference_limit = 0, .full_update_limit = 0, .update = OptimizerSettings{}}};
}

class StepCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    real_ = testing_support::make_cpu_backend();
    if (!real_) GTEST_SKIP() << "no CPU backend in this build";
  }
  // One checked step (update included) of a small ResNet on the real backend with `damage`.
  OpCheck check(DType dtype, const DamagingBackend::Damage& damage,
                OpCheckOptions options = {.update = OptimizerSettings{}},
                const ResNetConfig& config = resnet8_fashion_mnist(4)) {
    DamagingBackend backend(*real_, damage);
    const Network net = build_resnet(config);
    StepOptions step_options{dtype, Layout::native};
    std::unique_ptr<TrainingStep> step;
    OpCheck out;
    const Status made = prepared_step(backend, net, step_options, seeded_batch(net, 3), 7, &step);
    if (made.code() == StatusCode::unimplemented) {
      unimplemented_ = made.message();
      return out;
    }
    EXPECT_TRUE(made.ok()) << made.message();
    if (!made.ok()) return out;
    const Status checked = step->check_ops(&out, options);
    EXPECT_TRUE(checked.ok()) << checked.message();
    return out;
  }
  // `damage` fails the check, named at `where`, with the update checked both ways.
  void expect_caught(DType dtype, const DamagingBackend::Damage& damage, const char* what,
                     const char* where) {
    for (const OpCheckOptions& options : both_ways()) {
      const OpCheck out = check(dtype, damage, options);
      print_margin(what, out);
      EXPECT_FALSE(out.passed);
      EXPECT_NE(out.worst_output.find(where), std::string::npos) << out.worst_output;
    }
  }
  std::unique_ptr<Backend> real_;
  std::string unimplemented_;
};

TEST_F(StepCheck, SampledProductsPassUndamaged) {
  OpCheckOptions all_sampled{
      .full_reference_limit = 0, .full_update_limit = 0, .update = OptimizerSettings{}};
  const OpCheck sampled = check(DType::f32, nullptr, all_sampled);
  print_margin("f32, every product sampled", sampled);
  EXPECT_TRUE(sampled.passed) << sampled.worst_output << ": " << sampled.worst_error;
  EXPECT_GT(sampled.ops_sampled, 10);  // the products, the optimizer by tensors
  const OpCheck full = check(DType::f32, nullptr);
  print_margin("f32, in full", full);
  EXPECT_TRUE(full.passed) << full.worst_output << ": " << full.worst_error;
  EXPECT_EQ(full.ops_sampled, 0);
  EXPECT_EQ(full.ops_checked, sampled.ops_checked);
}

TEST_F(StepCheck, TheUpdateIsCheckedWhenAsked) {
  const OpCheck with = check(DType::f32, nullptr);
  const OpCheck without = check(DType::f32, nullptr, {});
  EXPECT_TRUE(with.passed && without.passed) << with.worst_output;
  EXPECT_EQ(with.ops_checked, without.ops_checked + 1);  // the optimizer
}

// A convolution forward 0.1% off: its output scaled after it ran.
bool scale_convolution_output(Backend& real, Plan& plan, std::span<const Buffer> b,
                              Buffer workspace) {
  if (!operands_named(plan, {"src", "weights", "dst"})) return false;
  EXPECT_TRUE(real.execute(plan, b, workspace).ok());
  const BoundOperands x(plan.operands(), b);
  float* dst = x.out<float>("dst");
  for (std::size_t i = 0; i < x.spec("dst").elements(); ++i) dst[i] *= 1.001f;
  return true;
}

TEST_F(StepCheck, SampledOutputsCatchAConvolutionOffByATenthOfAPercent) {
  const OpCheck out = check(DType::f32, scale_convolution_output,
                            {.full_reference_limit = 0, .update = OptimizerSettings{}});
  print_margin("conv dst x 1.001, sampled", out);
  EXPECT_FALSE(out.passed);
  EXPECT_NE(out.worst_output.find("conv dst"), std::string::npos) << out.worst_output;
  EXPECT_GT(out.worst_error, 5 * out.worst_tolerance);
}

// The measured batch's tier (OpCheckOptions::measured_batch) checks the products alone, sampled,
// at the same margins: undamaged it passes, a convolution 0.1% off fails, a weight gradient
// with one sample's worth of its batch dropped (a k-tile a kernel skipped) fails. The other
// ops and the update are left to the small batch's tier.
TEST_F(StepCheck, TheMeasuredBatchTierChecksTheProductsOnly) {
  const OpCheck clean =
      check(DType::f32, nullptr, OpCheckOptions::measured_batch(OptimizerSettings{}));
  print_margin("measured-batch tier, undamaged", clean);
  EXPECT_TRUE(clean.passed) << clean.worst_output << ": " << clean.worst_error;
  EXPECT_EQ(clean.ops_checked, clean.ops_sampled);  // nothing in full: every product sampled
  EXPECT_GT(clean.ops_sampled, 10);
  const OpCheck every_op = check(DType::f32, nullptr);
  EXPECT_LT(clean.ops_sampled, every_op.ops_checked);
  const OpCheck off = check(DType::f32, scale_convolution_output,
                            OpCheckOptions::measured_batch(OptimizerSettings{}));
  print_margin("measured-batch tier, conv dst x 1.001", off);
  EXPECT_FALSE(off.passed);
  EXPECT_NE(off.worst_output.find("conv dst"), std::string::npos) << off.worst_output;
  EXPECT_GT(off.worst_error, 5 * off.worst_tolerance);
  // The batch's last image left out of a weight gradient: what the kernel would compute had it
  // dropped that part of the reduction.
  auto dropped = [](Backend& real, Plan& plan, std::span<const Buffer> b, Buffer workspace) {
    if (!operands_named(plan, {"src", "diff_dst", "diff_weights"})) return false;
    const BoundOperands x(plan.operands(), b);
    const std::size_t per_image = x.spec("diff_dst").bytes / sizeof(float) / 4;  // batch 4
    std::vector<float> kept(per_image);
    // An input, changed for the damaged kernel's run only and restored after it.
    auto* diff_dst = static_cast<float*>(x.buffer("diff_dst").data);
    std::copy_n(diff_dst + 3 * per_image, per_image, kept.begin());
    std::fill_n(diff_dst + 3 * per_image, per_image, 0.0f);
    EXPECT_TRUE(real.execute(plan, b, workspace).ok());
    std::copy(kept.begin(), kept.end(), diff_dst + 3 * per_image);
    return true;
  };
  const OpCheck short_sum =
      check(DType::f32, dropped, OpCheckOptions::measured_batch(OptimizerSettings{}));
  print_margin("measured-batch tier, a weight gradient without its last image", short_sum);
  EXPECT_FALSE(short_sum.passed);
  EXPECT_NE(short_sum.worst_output.find("diff_weights"), std::string::npos)
      << short_sum.worst_output;
}

// The allowance for a cancelled normalization sum does not hide a wrong one.
TEST_F(StepCheck, ABatchNormBetaGradientOffByOnePercentFails) {
  auto damage = [](Backend& real, Plan& plan, std::span<const Buffer> b, Buffer workspace) {
    const BoundOperands x(plan.operands(), b);
    if (!x.has("diff_beta") || !x.has("src")) return false;  // a normalization's backward
    EXPECT_TRUE(real.execute(plan, b, workspace).ok());
    float* diff_beta = x.out<float>("diff_beta");
    for (std::size_t i = 0; i < x.spec("diff_beta").elements(); ++i) diff_beta[i] *= 1.01f;
    return true;
  };
  const OpCheck out = check(DType::f32, damage);
  print_margin("diff_beta x 1.01", out);
  EXPECT_FALSE(out.passed);
  EXPECT_NE(out.worst_output.find("diff_beta"), std::string::npos) << out.worst_output;
}

// RMSNorm (in a tiny BERT whose layer norms are RMSNorms) is checked against f64 op by op: the
// undamaged step passes, and each of its outputs off by 1% (its gamma gradient, its output, its
// data gradient) fails, named at that output.
TEST_F(StepCheck, RmsNormOutputsOffByOnePercentFail) {
  BertConfig config = bert_config("tiny", 2, 16);
  config.rms_norm = true, config.dropout = 0;
  const Network net = build_bert(config);
  auto check_bert = [&](const char* damaged_output) {
    DamagingBackend backend(
        *real_, [&](Backend& real, Plan& plan, std::span<const Buffer> b, Buffer workspace) {
          const BoundOperands x(plan.operands(), b);
          if (!damaged_output || !x.has("inverse_rms") || !x.has(damaged_output)) return false;
          EXPECT_TRUE(real.execute(plan, b, workspace).ok());
          float* values = x.out<float>(damaged_output);
          for (std::size_t i = 0; i < x.spec(damaged_output).elements(); ++i) values[i] *= 1.01f;
          return true;
        });
    std::unique_ptr<TrainingStep> step;
    OpCheck out;
    const Status made =
        prepared_step(backend, net, {DType::f32, Layout::native}, bert_batch(config, 3), 7, &step);
    EXPECT_TRUE(made.ok()) << made.message();
    if (made.ok()) {
      const Status checked = step->check_ops(&out, {.update = OptimizerSettings{}});
      EXPECT_TRUE(checked.ok()) << checked.message();
    }
    print_margin(damaged_output ? damaged_output : "undamaged RMSNorm", out);
    return out;
  };
  const OpCheck undamaged = check_bert(nullptr);
  EXPECT_TRUE(undamaged.passed) << undamaged.worst_output;
  EXPECT_GT(undamaged.ops_checked, 0);
  for (const char* output : {"diff_gamma", "dst", "diff_src"}) {
    const OpCheck out = check_bert(output);
    EXPECT_FALSE(out.passed) << output;
    EXPECT_NE(out.worst_output.find("rms_norm"), std::string::npos) << out.worst_output;
    EXPECT_NE(out.worst_output.find(output), std::string::npos) << out.worst_output;
  }
}

// A batch norm over two values per channel (batch 2, the last stage's 1x1 map) has a data
// gradient that cancels to about 1e-5 of its terms, so its relative error measures rounding:
// it is judged against those terms. That allowance does not hide a wrong one: a gradient off by
// 1% of |diff_dst| fails.
TEST_F(StepCheck, ACancelledBatchNormDataGradientIsJudgedByItsTerms) {
  ResNetConfig two_per_channel = resnet8_fashion_mnist(2);
  two_per_channel.image = 4;  // 4x4, then 2x2, then 1x1
  const OpCheck clean =
      check(DType::f32, nullptr, {.update = OptimizerSettings{}}, two_per_channel);
  print_margin("batch 2, 1x1 map, undamaged", clean);
  EXPECT_TRUE(clean.passed) << clean.worst_output << ": " << clean.worst_error;
  // Only the batch norms over a 1x1 map, where the gradient cancels: diff_src x gradient + shift
  // x |diff_dst|, element by element.
  auto damage_by = [](float scale, float shift) {
    return [=](Backend& real, Plan& plan, std::span<const Buffer> b, Buffer workspace) {
      const BoundOperands x(plan.operands(), b);
      if (!x.has("diff_beta") || !x.has("src")) return false;  // a normalization's backward
      const std::vector<std::int64_t>& dims = x.spec("src").dims;
      if (dims.size() != 4 || dims[2] * dims[3] != 1) return false;
      EXPECT_TRUE(real.execute(plan, b, workspace).ok());
      float* dx = x.out<float>("diff_src");
      const float* dy = x.in<float>("diff_dst");
      for (std::size_t i = 0; i < x.spec("diff_src").elements(); ++i)
        dx[i] = scale * dx[i] + shift * std::fabs(dy[i]);
      return true;
    };
  };
  // Off by the terms' size, and wrong at the gradient's own size (which is 1e-5 of its terms).
  for (const auto& [name, scale, shift] : {std::tuple{"diff_src + 1% |diff_dst|", 1.0f, 0.01f},
                                           {"diff_src zeroed", 0.0f, 0.0f},
                                           {"diff_src negated", -1.0f, 0.0f},
                                           {"diff_src doubled", 2.0f, 0.0f}}) {
    const OpCheck damaged = check(DType::f32, damage_by(scale, shift),
                                  {.update = OptimizerSettings{}}, two_per_channel);
    print_margin(fmt::format("batch 2, 1x1 map, {}", name).c_str(), damaged);
    EXPECT_FALSE(damaged.passed) << name;
    EXPECT_NE(damaged.worst_output.find("diff_src"), std::string::npos)
        << name << ": " << damaged.worst_output;
  }
}

TEST_F(StepCheck, ASkippedUpdateFails) {
  auto damage = [](Backend&, Plan& plan, std::span<const Buffer>, Buffer) {
    return operands_named(plan, {"weights", "grads", "momentum", "hyper"});  // not run
  };
  expect_caught(DType::f32, damage, "optimizer skipped", "optimizer");
}

TEST_F(StepCheck, MasterWeightsRoundedToBf16Fail) {
  auto damage = [](Backend& real, Plan& plan, std::span<const Buffer> b, Buffer workspace) {
    if (!operands_named(plan, {"weights", "grads", "momentum", "hyper"})) return false;
    EXPECT_TRUE(real.execute(plan, b, workspace).ok());
    const BoundOperands x(plan.operands(), b);
    float* weights = x.out<float>("weights");
    for (std::size_t i = 0; i < x.spec("weights").elements(); ++i)
      weights[i] = cpu::round_to_bf16(weights[i]);
    return true;
  };
  expect_caught(DType::f32, damage, "updated weights rounded to bf16", "optimizer");
}

TEST_F(StepCheck, AWeightCastThatTruncatesFails) {
  auto damage = [](Backend& real, Plan& plan, std::span<const Buffer> b, Buffer workspace) {
    if (!operands_named(plan, {"src", "dst"})) return false;
    const BoundOperands x(plan.operands(), b);
    if (x.spec("dst").dtype != DType::bf16 || x.spec("src").elements() < 1000)
      return false;  // the weights' cast, not an activation's
    EXPECT_TRUE(real.execute(plan, b, workspace).ok());
    auto* out = x.out<std::uint16_t>("dst");
    const float* in = x.in<float>("src");
    for (std::size_t i = 0; i < x.spec("src").elements(); ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, &in[i], sizeof(bits));
      out[i] = static_cast<std::uint16_t>(bits >> 16);
    }
    return true;
  };
  const OpCheck clean = check(DType::bf16, nullptr);
  if (!unimplemented_.empty()) GTEST_SKIP() << "bf16 steps are not run here: " << unimplemented_;
  EXPECT_TRUE(clean.passed) << clean.worst_output << ": " << clean.worst_error;
  print_margin("bf16, in full", clean);
  const OpCheck by_tensors = check(DType::bf16, nullptr, both_ways()[1]);
  print_margin("bf16, by tensors", by_tensors);
  EXPECT_TRUE(by_tensors.passed) << by_tensors.worst_output << ": " << by_tensors.worst_error;
  expect_caught(DType::bf16, damage, "weight cast truncating", "weight cast");
}

}  // namespace
}  // namespace tb
