// Every training op: cpu-onednn's f32 plans against the shared double-precision reference on
// the same inputs, and the reference's backward against finite differences of its forward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "backends/registry.h"
#include "tests/models/support.h"
#include "workloads/workload.h"

namespace tb {
namespace {

using testing_support::make_backend;
using testing_support::random;
using testing_support::run_op;

template <typename Op>
Op in_dtype(Op op, DType dtype, Layout layout) {
  op.dtype = dtype;
  if constexpr (requires { op.layout; }) op.layout = layout;
  return op;
}

class TrainingOps : public testing::Test {
 protected:
  void SetUp() override {
    library_ = make_backend("cpu-onednn");
    if (!library_) GTEST_SKIP() << "cpu-onednn is not in this build";
  }
  // The library's f32 plan and the f64 reference agree on every output operand.
  template <typename Op>
  void expect_agreement(const Op& op, const std::vector<std::vector<double>>& inputs,
                        const std::vector<int>& outputs, double tolerance = 1e-5) {
    const auto got = run_op(*library_, in_dtype(op, DType::f32, Layout::native), inputs);
    const auto want = run_op(*library_, in_dtype(op, DType::f64, Layout::plain), inputs);
    ASSERT_EQ(got.size(), want.size());
    for (int k : outputs)
      EXPECT_LT(relative_l2_error(got[k], want[k]), tolerance) << op_name(op) << " operand " << k;
  }
  std::unique_ptr<Backend> library_;
};

TEST_F(TrainingOps, ConvolutionAllDirections) {
  ConvOp op{.mb = 2,
            .ic = 16,
            .ih = 9,
            .iw = 9,
            .oc = 32,
            .kh = 3,
            .kw = 3,
            .sh = 2,
            .sw = 2,
            .ph = 1,
            .pw = 1};
  const std::size_t src = 2 * 16 * 81, weights = 32 * 16 * 9, dst = 2 * 32 * 5 * 5;
  expect_agreement(op, {random(src, 1), random(weights, 2)}, {2});
  op.direction = ConvDirection::backward_data;
  expect_agreement(op, {random(dst, 3), random(weights, 2)}, {2});
  op.direction = ConvDirection::backward_weights;
  expect_agreement(op, {random(src, 1), random(dst, 3)}, {2});
}

// Winograd, where oneDNN picks it (3x3 stride 1, enough images and channels): every
// direction within a tolerance that allows for its transforms' rounding.
TEST_F(TrainingOps, WinogradConvolutionAllDirections) {
  ConvOp op{.mb = 16, .ic = 64, .ih = 14, .iw = 14, .oc = 64, .kh = 3, .kw = 3, .ph = 1, .pw = 1};
  op.winograd_allowed = true;
  const std::size_t src = 16 * 64 * 196, weights = 64 * 64 * 9;
  std::unique_ptr<Plan> plan;
  ASSERT_TRUE(library_->plan(in_dtype(op, DType::f32, Layout::native), &plan).ok());
  const std::string implementation = plan->implementation();
  // Whatever convolution_auto picked is checked; below AVX-512 it is the direct kernel.
  expect_agreement(op, {random(src, 1), random(weights, 2)}, {2}, 1e-4);
  op.direction = ConvDirection::backward_data;
  expect_agreement(op, {random(src, 3), random(weights, 2)}, {2}, 1e-4);
  op.direction = ConvDirection::backward_weights;
  expect_agreement(op, {random(src, 1), random(src, 3)}, {2}, 1e-4);
  if (implementation.find("wino") == std::string::npos) {
    const DeviceInfo device = library_->device_info();
    const std::string isa = device.details.value("onednn_max_cpu_isa", std::string("unknown"));
    std::string version = "unknown";
    for (const auto& library : device.libraries)
      if (library.name == "oneDNN") version = library.version;
    if (!version.starts_with("2."))
      GTEST_SKIP() << "oneDNN " << version << " picked no Winograd kernel for training here ("
                   << isa << "), so the direct kernel (" << implementation << ") was checked";
    if (!isa.starts_with("avx512"))
      GTEST_SKIP() << "oneDNN 2.6 has Winograd only from avx512_core; it runs " << isa
                   << " here, so the direct kernel (" << implementation << ") was checked";
    ADD_FAILURE() << "no Winograd kernel on " << isa << ": " << implementation;
  }
}

// A convolution whose kernel in the shared activation layout would be a reference one (a
// weight gradient of a 3x3 kernel on a 2x2 image, as ResNet's last stage has at 64x64
// images) computes in a layout that has an optimized kernel, and is still right.
TEST_F(TrainingOps, AConvolutionWithoutAnOptimizedKernelInTheSharedLayoutFallsBack) {
  const ConvOp op{.direction = ConvDirection::backward_weights,
                  .mb = 2,
                  .ic = 64,
                  .ih = 2,
                  .iw = 2,
                  .oc = 64,
                  .kh = 3,
                  .kw = 3,
                  .ph = 1,
                  .pw = 1};
  std::unique_ptr<Plan> plan;
  ASSERT_TRUE(library_->plan(in_dtype(op, DType::f32, Layout::native), &plan).ok());
  EXPECT_FALSE(plan->is_reference()) << plan->implementation();
  const std::size_t src = 2 * 64 * 4, dst = 2 * 64 * 4;
  expect_agreement(op, {random(src, 1), random(dst, 3)}, {2});
}

TEST_F(TrainingOps, BatchNormForwardAndBackward) {
  for (bool relu : {false, true}) {
    BatchNormOp op{.mb = 3, .channels = 32, .h = 5, .w = 4, .fuse_relu = relu};
    const std::size_t data = 3 * 32 * 20;
    std::vector<double> gamma = random(32, 5), beta = random(32, 6);
    expect_agreement(op, {random(data, 4), gamma, beta}, {3, 4, 5});
    // backward from the reference's forward state (the mask comes from each side's forward)
    const auto forward =
        run_op(*library_, in_dtype(op, DType::f64, Layout::plain), {random(data, 4), gamma, beta});
    op.pass = Pass::backward;
    if (!relu)
      expect_agreement(op, {random(data, 4), random(data, 7), gamma, beta, forward[4], forward[5]},
                       {6, 7, 8});
  }
}

TEST_F(TrainingOps, PoolingAndElementwise) {
  PoolOp max{.mb = 2,
             .channels = 16,
             .ih = 8,
             .iw = 8,
             .kh = 3,
             .kw = 3,
             .sh = 2,
             .sw = 2,
             .ph = 1,
             .pw = 1};
  expect_agreement(max, {random(2 * 16 * 64, 8)}, {1});
  PoolOp average{.kind = PoolKind::global_average,
                 .mb = 2,
                 .channels = 16,
                 .ih = 4,
                 .iw = 4,
                 .kh = 4,
                 .kw = 4};
  expect_agreement(average, {random(2 * 16 * 16, 9)}, {1});
  average.pass = Pass::backward;
  expect_agreement(average, {random(2 * 16, 10)}, {1});
  BinaryOp add{.count = 1000, .fuse_relu = true};
  expect_agreement(add, {random(1000, 11), random(1000, 12)}, {2});
  EltwiseOp relu{.pass = Pass::backward, .count = 1000};
  expect_agreement(relu, {random(1000, 13), random(1000, 14)}, {2});
  FullyConnectedOp fc{.mb = 4, .in = 64, .out = 10};
  expect_agreement(fc, {random(256, 15), random(640, 16), random(10, 17)}, {3});
  fc.direction = ConvDirection::backward_data;
  expect_agreement(fc, {random(40, 18), random(640, 16)}, {2});
  fc.direction = ConvDirection::backward_weights;
  expect_agreement(fc, {random(256, 15), random(40, 18)}, {2, 3});
}

}  // namespace
}  // namespace tb
