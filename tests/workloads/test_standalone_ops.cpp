// A training step's product ops timed alone: each distinct problem planned once, its inputs
// filled with data, and every layer given the sum of its own ops' times.
#include <gtest/gtest.h>

#include "backends/operands.h"
#include "backends/registry.h"
#include "tests/forwarding_backend.h"
#include "workloads/standalone_ops.h"

namespace tb {
namespace {

// Counts plans and executions, and records whether every input an op read held data.
class CountingBackend final : public testing_support::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override {
    ++plans;
    if (refuse_plans) return Status::Unimplemented("no kernel for this problem");
    return real_.plan(op, out);
  }
  Status execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) override {
    ++executions;
    const BoundOperands bound(plan.operands(), operands);
    for (const OperandSpec& spec : plan.operands()) {
      if (spec.is_output || spec.dtype != DType::f32) continue;
      const float* values = bound.in<float>(spec.name);
      bool any = false;
      for (std::size_t i = 0; i < spec.elements() && !any; ++i) any = values[i] != 0.0f;
      inputs_hold_data = inputs_hold_data && any;
    }
    return real_.execute(plan, operands, workspace);
  }
  int plans = 0, executions = 0;
  bool inputs_hold_data = true;
  bool refuse_plans = false;
};

class StandaloneOps : public testing::Test {
 protected:
  void SetUp() override {
    const BackendEntry* entry = find_backend("cpu-onednn");
    if (!entry) GTEST_SKIP() << "cpu-onednn is not in this build";
    ASSERT_TRUE(entry->create(BackendConfig{}, &real_).ok());
  }
  std::unique_ptr<Backend> real_;
};

FullyConnectedOp small_linear() {
  FullyConnectedOp op;
  op.mb = 16, op.in = 64, op.out = 32;
  return op;
}

TEST_F(StandaloneOps, EachProblemIsTimedOnceAndEveryLayerGetsItsOwnOps) {
  ConvOp conv;
  conv.mb = 2, conv.ic = 8, conv.ih = conv.iw = 12, conv.oc = 16, conv.kh = conv.kw = 3;
  conv.ph = conv.pw = 1;
  FullyConnectedOp backward = small_linear();
  backward.direction = ConvDirection::backward_data;
  // Layers 0 and 2 hold the same linear problem; layer 3 has none.
  const std::vector<LayerProductOp> ops = {
      {0, small_linear()}, {0, backward}, {1, conv}, {2, small_linear()}};
  CountingBackend backend(*real_);
  const StandaloneTiming timing{.reps = 3};
  std::vector<double> seconds;
  ASSERT_TRUE(time_product_ops_alone(backend, ops, 4, 7, timing, &seconds).ok());
  EXPECT_EQ(backend.plans, 3);
  EXPECT_EQ(backend.executions, 3 * (timing.reps + 1));
  EXPECT_TRUE(backend.inputs_hold_data);
  ASSERT_EQ(seconds.size(), 4u);
  EXPECT_GT(seconds[0], 0);
  EXPECT_GT(seconds[1], 0);
  EXPECT_GT(seconds[2], 0);
  EXPECT_GT(seconds[0], seconds[2]);  // the same time reused, plus the backward op's
  EXPECT_EQ(seconds[3], 0);
}

TEST_F(StandaloneOps, AnOpThatCannotBePlannedIsAnErrorNamingIt) {
  CountingBackend backend(*real_);
  backend.refuse_plans = true;
  std::vector<double> seconds;
  const Status status = time_product_ops_alone(backend, {{0, small_linear()}}, 1, 7, {}, &seconds);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("fully_connected alone: no kernel"), std::string::npos)
      << status.message();
}

TEST(ProductFlops, CountTheMultiplyAddsOfEveryProductOp) {
  GemmOp gemm;
  gemm.m = 3, gemm.n = 5, gemm.k = 7, gemm.batch = 2, gemm.heads = 4;
  EXPECT_EQ(product_flops(gemm), 2.0 * 3 * 5 * 7 * 2 * 4);
  ConvOp conv;
  conv.mb = 2, conv.ic = 3, conv.ih = conv.iw = 8, conv.oc = 4, conv.kh = conv.kw = 3;
  conv.direction = ConvDirection::backward_weights;  // every direction: the forward's work
  EXPECT_EQ(product_flops(conv), 2.0 * 2 * 4 * 6 * 6 * 3 * 3 * 3);
  EXPECT_EQ(product_flops(small_linear()), 2.0 * 16 * 64 * 32);
  AttentionOp attention;
  attention.batch = 2, attention.heads = 3, attention.sequence = 5, attention.head_dim = 7;
  EXPECT_EQ(product_flops(attention), 2 * 2.0 * 2 * 3 * 5 * 5 * 7);
  attention.pass = Pass::backward;
  EXPECT_EQ(product_flops(attention), 4 * 2.0 * 2 * 3 * 5 * 5 * 7);
  EXPECT_EQ(product_flops(EltwiseOp{}), 0);
}

}  // namespace
}  // namespace tb
