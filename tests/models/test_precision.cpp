// The precision policies beyond f32 / bf16 (tf32, f16) and dynamic loss scaling, on the CPU:
// the scaler's rule, scaled steps whose gradients equal unscaled ones, steps with non-finite
// gradients skipped without touching the weights, and the ops' check with a scaled loss.
#include <gtest/gtest.h>

#include <cmath>

#include "models/bert.h"
#include "models/precision.h"
#include "models/reference_check.h"
#include "models/training_step.h"
#include "tests/models/support.h"

namespace tb {
namespace {

using testing_support::make_backend;
using testing_support::make_cpu_backend;

TEST(PrecisionPolicy, Tf32AndF16Policies) {
  const PrecisionPolicy tf32 = PrecisionPolicy::for_compute(DType::tf32);
  EXPECT_EQ(tf32.compute, DType::f32);
  EXPECT_FALSE(tf32.mixed());
  EXPECT_EQ(tf32.matmul_dtype(DType::f32), DType::tf32);
  EXPECT_FALSE(tf32.needs_loss_scaling());
  const PrecisionPolicy f16 = PrecisionPolicy::for_compute(DType::f16);
  EXPECT_EQ(f16.compute, DType::f16);
  EXPECT_EQ(f16.master, DType::f32);
  EXPECT_EQ(f16.layer_dtype(LayerKind::softmax_cross_entropy), DType::f32);
  EXPECT_EQ(f16.matmul_dtype(DType::f16), DType::f16);
  EXPECT_TRUE(f16.needs_loss_scaling());
  EXPECT_FALSE(PrecisionPolicy::for_compute(DType::bf16).needs_loss_scaling());
  EXPECT_EQ(PrecisionPolicy::for_compute(DType::f32).matmul_dtype(DType::f32), DType::f32);
}

// GradScaler's rule: halve and skip on overflow, double after growth_interval clean steps.
TEST(DynamicLossScale, HalvesOnOverflowAndGrowsAfterCleanSteps) {
  DynamicLossScale scale;
  scale.growth_interval = 3;
  EXPECT_FALSE(scale.update(true));
  EXPECT_EQ(scale.scale, 32768.0);
  EXPECT_EQ(scale.skipped_steps, 1);
  EXPECT_TRUE(scale.update(false));
  EXPECT_TRUE(scale.update(false));
  EXPECT_EQ(scale.scale, 32768.0);
  EXPECT_TRUE(scale.update(false));  // the third clean step in a row
  EXPECT_EQ(scale.scale, 65536.0);
  EXPECT_TRUE(scale.update(false));
  EXPECT_FALSE(scale.update(true));  // an overflow restarts the count
  EXPECT_TRUE(scale.update(false));
  EXPECT_TRUE(scale.update(false));
  EXPECT_EQ(scale.scale, 32768.0);
  EXPECT_EQ(scale.skipped_steps, 2);
}

class LossScalingTest : public testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cpu_backend();
    if (!backend_) GTEST_SKIP() << "no CPU backend in this build";
    config_ = bert_config("tiny", 2, 32);
    config_.dropout = 0;
    batch_ = bert_batch(config_, 5, true);
  }
  std::unique_ptr<TrainingStep> step(tb::LossScaling scaling, double initial) {
    StepOptions options;
    options.optimizer = OptimizerKind::adamw;
    options.loss_scaling = scaling;
    options.initial_loss_scale = initial;
    std::unique_ptr<TrainingStep> out;
    const Status made = prepared_step(*backend_, build_bert(config_), options, batch_, 9, &out);
    EXPECT_TRUE(made.ok()) << made.message();
    return out;
  }
  std::unique_ptr<Backend> backend_;
  BertConfig config_;
  std::vector<NamedTensor> batch_;
};

// Scaling by a power of two is exact in fp32: the unscaled gradients equal plain ones.
TEST_F(LossScalingTest, ScaledGradientsEqualUnscaledOnes) {
  auto plain = step(tb::LossScaling::none, 1);
  auto scaled = step(tb::LossScaling::dynamic, 1024);
  ASSERT_TRUE(plain && scaled);
  EXPECT_EQ(plain->loss_scale(), nullptr);
  ASSERT_NE(scaled->loss_scale(), nullptr);
  std::vector<NamedTensor> want, got;
  for (auto* s : {plain.get(), scaled.get()}) ASSERT_TRUE(s->run(false, {}).ok());
  ASSERT_TRUE(plain->gradients(&want).ok());
  ASSERT_TRUE(scaled->gradients(&got).ok());
  const GradientError worst = worst_gradient_error(got, want);
  EXPECT_LT(worst.error, 1e-6) << worst.parameter;
  double loss_plain = 0, loss_scaled = 0;
  ASSERT_TRUE(plain->loss(&loss_plain).ok());
  ASSERT_TRUE(scaled->loss(&loss_scaled).ok());
  EXPECT_EQ(loss_plain, loss_scaled);  // the reported loss is never scaled
  OpCheck check;
  ASSERT_TRUE(scaled->check_ops(&check).ok());
  EXPECT_TRUE(check.passed) << check.worst_output << " " << check.worst_error;
}

// A step whose gradients are not finite (here: one embedding value so large that layer norm's
// variance overflows) is skipped: the weights and the optimizer's step count stay as they
// were and the scale halves. The next clean step goes through.
TEST_F(LossScalingTest, NonFiniteGradientsSkipTheStep) {
  auto s = step(tb::LossScaling::dynamic, 65536);
  ASSERT_TRUE(s);
  std::vector<NamedTensor> clean, poisoned, after;
  ASSERT_TRUE(s->state(&clean).ok());
  poisoned = clean;
  for (NamedTensor& t : poisoned)
    if (t.name == "bert.embeddings.word_embeddings.weight")
      for (std::size_t i = 0; i < t.values.size(); i += 128) t.values[i] = 3e38;
  ASSERT_TRUE(s->load_state(poisoned).ok());
  ASSERT_TRUE(s->state(&poisoned).ok());  // as stored (3e38 rounded to float)
  OptimizerSettings settings;
  settings.learning_rate = 1e-3f;
  ASSERT_TRUE(s->run(true, settings).ok());
  EXPECT_EQ(s->steps_taken(), 0);
  EXPECT_EQ(s->loss_scale()->skipped_steps, 1);
  EXPECT_EQ(s->loss_scale()->scale, 32768.0);
  ASSERT_TRUE(s->state(&after).ok());
  for (std::size_t t = 0; t < poisoned.size(); ++t)
    ASSERT_EQ(poisoned[t].values, after[t].values) << poisoned[t].name;

  ASSERT_TRUE(s->load_state(clean).ok());
  std::vector<double> losses;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s->run(true, settings).ok());
    double loss = 0;
    ASSERT_TRUE(s->loss(&loss).ok());
    losses.push_back(loss);
  }
  EXPECT_EQ(s->steps_taken(), 4);
  EXPECT_EQ(s->loss_scale()->skipped_steps, 1);
  EXPECT_EQ(s->loss_scale()->scale, 32768.0);
  EXPECT_LT(losses.back(), losses.front());
}

// The CPU backends have no f16 or TF32 arithmetic: such a step is refused with a reason.
TEST_F(LossScalingTest, CpuBackendsRefuseF16AndTf32Steps) {
  for (DType dtype : {DType::f16, DType::tf32}) {
    std::unique_ptr<TrainingStep> out;
    const Status status = TrainingStep::create(*backend_, build_bert(config_), {dtype}, &out);
    EXPECT_EQ(status.code(), StatusCode::unimplemented) << dtype_name(dtype);
    EXPECT_FALSE(status.message().empty());
  }
}

}  // namespace
}  // namespace tb
