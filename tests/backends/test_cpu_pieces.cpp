#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/host/host_info.h"
#include "backends/host/threading.h"
#include "backends/low_precision.h"
#include "backends/product_reference.h"
#include "backends/reference/reference.h"
#include "backends/registry.h"

namespace tb::cpu {
namespace {

TEST(HostInventory, DescribesThisMachine) {
  const HostInventory host = read_host_inventory();
  EXPECT_FALSE(host.cpu_model.empty());
  EXPECT_GE(host.logical_cpus, 1);
  EXPECT_GE(host.cores, 1);
  EXPECT_GE(host.sockets, 1);
  EXPECT_FALSE(host.cores_allowed.empty());
  EXPECT_GT(host.memory_total_bytes, host.memory_available_bytes / 2);
  EXPECT_GE(host.numa_nodes, 1);
  EXPECT_FALSE(host.os.empty());
  EXPECT_GT(host.last_level_cache_bytes_for_sizing(host.allowed_cpus()), 0u)
      << "cache source: " << host.cache_source;
}

TEST(HostInventory, ClockIsPlausible) {
  const double ghz = measure_clock_ghz();
  EXPECT_GT(ghz, 0.5);
  EXPECT_LT(ghz, 7.0);
}

TEST(Threading, DefaultIsOneThreadPerCorePinned) {
  const HostInventory host = read_host_inventory();
  const ThreadPlacement placement = configure_threads(BackendConfig{}, host);
  EXPECT_EQ(placement.threads, static_cast<int>(host.cores_allowed.size()));
  ASSERT_EQ(placement.affinity.size(), static_cast<std::size_t>(placement.threads));
  for (std::size_t i = 0; i < placement.affinity.size(); ++i)
    EXPECT_EQ(placement.affinity[i], host.cores_allowed[i].logical_cpus[0]);
}

TEST(Threading, ExplicitCountUnpinned) {
  const ThreadPlacement placement =
      configure_threads(BackendConfig{1, PinPolicy::none}, read_host_inventory());
  EXPECT_EQ(placement.threads, 1);
  EXPECT_EQ(placement.affinity, std::vector<int>{-1});
  configure_threads(BackendConfig{}, read_host_inventory());  // restore for later tests
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-8f), 1.0f);                // tie -> even
  EXPECT_EQ(round_to_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);  // tie -> even (up)
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-7f + 0x1p-9f), 1.0f + 0x1p-7f);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

TEST(LowPrecision, HalfRoundTripsAndRounds) {
  for (float value : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 0x1p-14f, 0x1p-24f, 0.1f, 3.14159f})
    EXPECT_EQ(f16_to_float(float_to_f16(round_to_f16(value))), round_to_f16(value)) << value;
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);                     // rounds to infinity
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);                     // smallest subnormal
  EXPECT_EQ(round_to_f16(1.0f + 0x1p-11f), 1.0f);                // tie -> even
  EXPECT_EQ(round_to_f16(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(NAN))));
}

TEST(LowPrecision, Tf32KeepsTenMantissaBits) {
  EXPECT_EQ(round_to_tf32(1.0f + 0x1p-11f), 1.0f);             // tie -> even
  EXPECT_EQ(round_to_tf32(1.0f + 0x1p-10f), 1.0f + 0x1p-10f);  // representable
  EXPECT_EQ(round_to_tf32(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);
  EXPECT_TRUE(std::isinf(round_to_tf32(INFINITY)));
}

TEST(Reference, GemmMatchesHandComputation) {
  // A = [1 2; 3 4] (2x2), B = [5; 6] (2x1), C0 = [1; 1].
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6}, c0 = {1, 1};
  GemmOp op;
  op.m = 2, op.n = 1, op.k = 2, op.alpha = 2, op.beta = -1;
  EXPECT_DOUBLE_EQ(gemm_reference(op, a.data(), b.data(), c0.data(), 0, 0, 0).value, 2 * 17 - 1);
  EXPECT_DOUBLE_EQ(gemm_reference(op, a.data(), b.data(), c0.data(), 0, 1, 0).value, 2 * 39 - 1);
  op.trans_a = true;  // A stored transposed: op(A) = [1 3; 2 4]
  EXPECT_DOUBLE_EQ(gemm_reference(op, a.data(), b.data(), c0.data(), 0, 0, 0).value, 2 * 23 - 1);
  const std::vector<double> right = {2 * 23 - 1, 2 * 34 - 1}, wrong = {2 * 23 - 1, 2 * 34};
  const ErrorScale scale{0x1p-24, 0x1p-24};
  for (std::int64_t groups : {1, 2}) {  // more groups than columns are clamped to n
    EXPECT_EQ(gemm_probe_error(op, a.data(), b.data(), c0.data(), right.data(), groups, scale, 1),
              0);
    EXPECT_GT(gemm_probe_error(op, a.data(), b.data(), c0.data(), wrong.data(), groups, scale, 1),
              1e3);
  }
}

TEST(Reference, ConvDirectionsAreAdjoint) {
  // <conv(x, w), y> = <x, conv_bwd_data(y, w)> = <w, conv_bwd_weights(x, y)>.
  ConvOp op;
  op.mb = 2, op.ic = 3, op.ih = 7, op.iw = 6, op.oc = 4, op.kh = 3, op.kw = 2, op.sh = 2, op.sw = 1,
  op.ph = 1, op.pw = 1;
  const std::int64_t oh = op.oh(), ow = op.ow();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  auto randoms = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  const auto x = randoms(op.mb * op.ic * op.ih * op.iw), w = randoms(op.oc * op.ic * op.kh * op.kw),
             y = randoms(op.mb * op.oc * oh * ow);
  double forward = 0, data = 0, weights = 0;
  for (std::int64_t n = 0; n < op.mb; ++n)
    for (std::int64_t c = 0; c < op.oc; ++c)
      for (std::int64_t h = 0; h < oh; ++h)
        for (std::int64_t v = 0; v < ow; ++v)
          forward += reference::conv_forward_element(op, x.data(), w.data(), n, c, h, v).value *
                     y[((n * op.oc + c) * oh + h) * ow + v];
  for (std::int64_t n = 0; n < op.mb; ++n)
    for (std::int64_t c = 0; c < op.ic; ++c)
      for (std::int64_t h = 0; h < op.ih; ++h)
        for (std::int64_t v = 0; v < op.iw; ++v)
          data += reference::conv_backward_data_element(op, y.data(), w.data(), n, c, h, v).value *
                  x[((n * op.ic + c) * op.ih + h) * op.iw + v];
  for (std::int64_t o = 0; o < op.oc; ++o)
    for (std::int64_t c = 0; c < op.ic; ++c)
      for (std::int64_t h = 0; h < op.kh; ++h)
        for (std::int64_t v = 0; v < op.kw; ++v)
          weights +=
              reference::conv_backward_weights_element(op, x.data(), y.data(), o, c, h, v).value *
              w[((o * op.ic + c) * op.kh + h) * op.kw + v];
  EXPECT_NEAR(forward, data, 1e-9);
  EXPECT_NEAR(forward, weights, 1e-9);
  EXPECT_NE(forward, 0);
}

// A sum carries what both error scales need: validation's sum of squares, the op check's sum of
// magnitudes; alpha scales every term.
TEST(ProductReference, ASumKeepsItsSquaresAndMagnitude) {
  reference::ProductSum sum;
  sum.add(2, 3);
  sum.add(-1, 4);
  EXPECT_EQ(sum.value, 2);
  EXPECT_EQ(sum.squares, 52);
  EXPECT_EQ(sum.magnitude, 10);
  sum.scale(-2);
  EXPECT_EQ(sum.value, -4);
  EXPECT_EQ(sum.squares, 208);
  EXPECT_EQ(sum.magnitude, 20);
  reference::add_bias(sum, 1.5, /*relu=*/true);  // -2.5, then ReLU
  EXPECT_EQ(sum.value, 0);
  EXPECT_EQ(sum.squares, 210.25);
}

// A fully connected layer's directions (y = x W^T + b, dx = dy W, dW = dy^T x, db = column sums
// of dy), element by element against the sums written out.
TEST(ProductReference, FullyConnectedDirections) {
  FullyConnectedOp fc{.mb = 3, .in = 5, .out = 4};
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  auto randoms = [&](std::int64_t n) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (double& x : v) x = u(rng);
    return v;
  };
  const auto x = randoms(fc.mb * fc.in), w = randoms(fc.out * fc.in), dy = randoms(fc.mb * fc.out);
  for (std::int64_t n = 0; n < fc.mb; ++n)
    for (std::int64_t o = 0; o < fc.out; ++o) {
      double want = 0;
      for (std::int64_t i = 0; i < fc.in; ++i) want += x[n * fc.in + i] * w[o * fc.in + i];
      EXPECT_EQ(reference::fully_connected_element(fc, x.data(), w.data(), n, o).value, want);
    }
  fc.direction = ConvDirection::backward_data;
  for (std::int64_t n = 0; n < fc.mb; ++n)
    for (std::int64_t i = 0; i < fc.in; ++i) {
      double want = 0;
      for (std::int64_t o = 0; o < fc.out; ++o) want += dy[n * fc.out + o] * w[o * fc.in + i];
      EXPECT_EQ(reference::fully_connected_element(fc, dy.data(), w.data(), n, i).value, want);
    }
  fc.direction = ConvDirection::backward_weights;
  for (std::int64_t o = 0; o < fc.out; ++o) {
    double column = 0;
    for (std::int64_t i = 0; i < fc.in; ++i) {
      double want = 0;
      for (std::int64_t n = 0; n < fc.mb; ++n) want += dy[n * fc.out + o] * x[n * fc.in + i];
      EXPECT_EQ(reference::fully_connected_element(fc, dy.data(), x.data(), o, i).value, want);
    }
    for (std::int64_t n = 0; n < fc.mb; ++n) column += dy[n * fc.out + o];
    EXPECT_EQ(reference::fully_connected_bias_gradient_element(fc, dy.data(), o).value, column);
  }
}

}  // namespace
}  // namespace tb::cpu
