// The CPU backends agree with each other: the same GEMM and convolution cases, from the same
// inputs, on every pair of usable CPU backends, element by element within the dtype's
// tolerance (twice it: each side may err by the tolerance).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>

#include "backends/product_reference.h"
#include "backends/reference/reference.h"
#include "backends/registry.h"
#include "workloads/workload.h"

namespace tb {
namespace {

// Runs `op` once on `backend` with `inputs` (plain layout, one vector per input operand, in
// the plan's operand order) and returns the plain output.
std::vector<float> run_once(Backend& backend, const OpDesc& op,
                            const std::vector<std::vector<float>>& inputs) {
  std::unique_ptr<Plan> plan;
  const Status planned = backend.plan(op, &plan);
  EXPECT_TRUE(planned.ok()) << backend.name() << ": " << planned.message();
  if (!planned.ok()) return {};
  std::vector<Buffer> buffers;
  for (const OperandSpec& spec : plan->operands()) {
    buffers.emplace_back();
    EXPECT_TRUE(backend.allocate(spec.bytes, &buffers.back()).ok());
  }
  Buffer workspace;
  if (plan->workspace_bytes() > 0) {
    EXPECT_TRUE(backend.allocate(plan->workspace_bytes(), &workspace).ok());
  }
  for (std::size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(
        backend.import_operand(*plan, static_cast<int>(i), inputs[i].data(), buffers[i]).ok());
  EXPECT_TRUE(backend.execute(*plan, buffers, workspace).ok());
  const int output = static_cast<int>(plan->operands().size()) - 1;
  std::vector<float> result(plan->operands()[output].elements());
  EXPECT_TRUE(backend.export_operand(*plan, output, buffers[output], result.data()).ok());
  for (const Buffer& buffer : buffers) backend.release(buffer);
  backend.release(workspace);
  return result;
}

class Agreement : public testing::Test {
 protected:
  void SetUp() override {
    for (const BackendEntry& entry : backend_registry()) {
      if (!entry.probe().usable) continue;
      std::unique_ptr<Backend> backend;
      ASSERT_TRUE(entry.create(BackendConfig{}, &backend).ok());
      if (backend->device_info().kind == "cpu") backends_.push_back(std::move(backend));
    }
    if (backends_.size() < 2) GTEST_SKIP() << "fewer than two CPU backends in this build";
  }

  // Every pair of backends agrees on every element, relative to the element's magnitude.
  void expect_agreement(const OpDesc& op, const std::vector<std::vector<float>>& inputs,
                        const std::function<cpu::ReferenceValue(std::size_t)>& reference,
                        std::int64_t reduction) {
    std::vector<std::vector<float>> per_backend;
    for (auto& backend : backends_) per_backend.push_back(run_once(*backend, op, inputs));
    // Two outputs within the tolerance of the exact value are within twice it of each other.
    const double allowed = 2 * kErrorTolerance;
    const cpu::ErrorScale scale = error_scale(DType::f32, reduction);
    const std::vector<float>& first = per_backend.front();
    for (std::size_t other = 1; other < per_backend.size(); ++other) {
      ASSERT_EQ(per_backend[other].size(), first.size());
      double worst = 0;
      for (std::size_t i = 0; i < first.size(); ++i) {
        const cpu::ReferenceValue ref = reference(i);
        worst = std::max(worst, scale.error(first[i], {per_backend[other][i], ref.squares}));
      }
      EXPECT_LE(worst, allowed) << backends_[0]->name() << " vs " << backends_[other]->name();
    }
  }

  std::vector<std::unique_ptr<Backend>> backends_;
};

TEST_F(Agreement, Gemm) {
  for (auto [m, n, k, ta, tb] : {std::tuple{7, 1000, 13, false, false},
                                 {64, 48, 300, true, false},
                                 {1, 1, 1000, false, true},
                                 {129, 65, 33, true, true}}) {
    GemmOp op;
    op.m = m, op.n = n, op.k = k, op.trans_a = ta, op.trans_b = tb, op.alpha = 0.75f,
    op.beta = 0.5f;
    const auto a = random_values(m * k, 1, DType::f32), b = random_values(k * n, 2, DType::f32),
               c = random_values(m * n, 3, DType::f32);
    expect_agreement(
        op, {a, b, c},
        [&](std::size_t i) {
          return cpu::gemm_reference(op, a.data(), b.data(), c.data(), 0, i / n, i % n);
        },
        k);
  }
}

TEST_F(Agreement, ConvEveryDirection) {
  ConvOp op;
  op.mb = 2, op.ic = 5, op.ih = 11, op.iw = 9, op.oc = 6, op.kh = 3, op.kw = 3, op.sh = 2,
  op.sw = 2, op.ph = 1, op.pw = 1;
  const std::int64_t oh = op.oh(), ow = op.ow();
  const auto src = random_values(op.mb * op.ic * op.ih * op.iw, 4, DType::f32);
  const auto weights = random_values(op.oc * op.ic * op.kh * op.kw, 5, DType::f32);
  const auto dst = random_values(op.mb * op.oc * oh * ow, 6, DType::f32);
  // Unflattens an NCHW / OIHW index.
  auto split = [](std::size_t i, std::int64_t d1, std::int64_t d2, std::int64_t d3) {
    const auto index = static_cast<std::int64_t>(i);
    return std::array<std::int64_t, 4>{index / (d1 * d2 * d3), index / (d2 * d3) % d1,
                                       index / d3 % d2, index % d3};
  };
  op.direction = ConvDirection::forward;
  expect_agreement(
      op, {src, weights},
      [&](std::size_t i) {
        const auto x = split(i, op.oc, oh, ow);
        const reference::ProductSum sum =
            reference::conv_forward_element(op, src.data(), weights.data(), x[0], x[1], x[2], x[3]);
        return cpu::ReferenceValue{sum.value, sum.squares};
      },
      op.ic * op.kh * op.kw);
  op.direction = ConvDirection::backward_data;
  expect_agreement(
      op, {dst, weights},
      [&](std::size_t i) {
        const auto x = split(i, op.ic, op.ih, op.iw);
        const reference::ProductSum sum = reference::conv_backward_data_element(
            op, dst.data(), weights.data(), x[0], x[1], x[2], x[3]);
        return cpu::ReferenceValue{sum.value, sum.squares};
      },
      op.oc * op.kh * op.kw);
  op.direction = ConvDirection::backward_weights;
  expect_agreement(
      op, {src, dst},
      [&](std::size_t i) {
        const auto x = split(i, op.ic, op.kh, op.kw);
        const reference::ProductSum sum = reference::conv_backward_weights_element(
            op, src.data(), dst.data(), x[0], x[1], x[2], x[3]);
        return cpu::ReferenceValue{sum.value, sum.squares};
      },
      op.mb * oh * ow);
}

}  // namespace
}  // namespace tb
