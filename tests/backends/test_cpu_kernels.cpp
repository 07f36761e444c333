// trainbench's own CPU kernels level by level: every kernel of the avx2 (x86-64-v3) and avx512
// (x86-64-v4) tables against the portable table on the same seeded data, on a CPU that runs
// the level (skipped, saying so, where it does not), and the run-time choice of the level.
//
// Tolerances: the x86-64-v3 and v4 builds fuse a * b + c into one rounding, and reductions in
// float (softmax, LAMB's norms) and STREAM's dot go through as many lanes as the level's
// vectors hold, so those kernels agree with the portable loop to a few units in the last place
// of the result's type (the bound is stated at each check). Kernels that only compare, select,
// copy, add in a fixed order or multiply once are checked bitwise: ReLU, add, dropout, casts,
// pooling, im2col / col2im, STREAM copy / scale / add, batch norm's mean and diff_beta (double
// sums through Lanes16, the same association on every level).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu_kernels/stream.h"
#include "backends/cpu_kernels/training_ops.h"
#include "backends/cpu_kernels/vector_kernels.h"
#include "backends/host/isa.h"
#include "backends/low_precision.h"
#include "backends/seeded.h"
#include "tests/scoped_env.h"

namespace tb::cpu {
namespace {

using Index = std::int64_t;

std::string level_label(Isa isa) {
  switch (isa) {
    case Isa::avx2:
      return "avx2 (x86-64-v3)";
    case Isa::avx512:
      return "avx512 (x86-64-v4)";
    default:
      return std::string(isa_name(isa));
  }
}

std::vector<float> randoms(std::size_t n, unsigned seed, float low = -1.0f, float high = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::uint32_t bits_of(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}
std::uint64_t bits_of(double x) {
  std::uint64_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

// Bitwise equality (NaN payloads and the sign of zero included); reports the first difference.
template <typename T>
::testing::AssertionResult same_bits(const std::vector<T>& fast, const std::vector<T>& portable) {
  if (fast.size() != portable.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < fast.size(); ++i) {
    bool equal;
    if constexpr (std::is_floating_point_v<T>)
      equal = bits_of(fast[i]) == bits_of(portable[i]);
    else
      equal = fast[i] == portable[i];
    if (!equal)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << +fast[i] << " vs portable " << +portable[i];
  }
  return ::testing::AssertionSuccess();
}

// |fast - portable| <= relative * |portable| + absolute, element by element.
template <typename T>
::testing::AssertionResult close(const std::vector<T>& fast, const std::vector<T>& portable,
                                 double relative, double absolute) {
  if (fast.size() != portable.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < fast.size(); ++i) {
    const double a = fast[i], b = portable[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (!(std::fabs(a - b) <= relative * std::fabs(b) + absolute))
      return ::testing::AssertionFailure() << "element " << i << ": " << a << " vs portable " << b
                                           << " (off by " << std::fabs(a - b) << ")";
  }
  return ::testing::AssertionSuccess();
}

constexpr double kFloatUlp = FLT_EPSILON;  // 2^-23: one unit in the last place, relative

// The level under test, against the portable table; skipped where the CPU lacks the level.
class KernelLevel : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam()))
      GTEST_SKIP() << "this CPU lacks " << level_label(GetParam())
                   << ": its kernels cannot run here";
    if (cpu_kernels(GetParam()).isa != GetParam())
      GTEST_SKIP() << level_label(GetParam()) << " kernels are not built for this architecture";
  }
  const CpuKernels& fast() const { return cpu_kernels(GetParam()); }
  static const CpuKernels& portable() { return cpu_kernels(Isa::portable); }
};

// Sizes around the vector widths (4, 8, 16 floats) and the 16 lanes of the double sums.
const std::vector<Index> kCounts = {1, 3, 15, 16, 17, 31, 1000, 4099, 100003};

TEST_P(KernelLevel, ReluForwardAndBackwardAreBitwise) {
  for (const Index n : kCounts) {
    std::vector<float> src = randoms(n, 1), diff = randoms(n, 2);
    src[0] = -0.0f;
    if (n > 2) src[2] = NAN;
    std::vector<float> a(n), b(n);
    fast().relu_forward_f32(n, src.data(), a.data());
    portable().relu_forward_f32(n, src.data(), b.data());
    EXPECT_TRUE(same_bits(a, b)) << "forward, n = " << n;
    fast().relu_backward_f32(n, src.data(), diff.data(), a.data());
    portable().relu_backward_f32(n, src.data(), diff.data(), b.data());
    EXPECT_TRUE(same_bits(a, b)) << "backward, n = " << n;
  }
}

TEST_P(KernelLevel, AddIsBitwiseWithAndWithoutRelu) {
  for (const Index n : kCounts)
    for (const bool relu : {false, true}) {
      const std::vector<float> x = randoms(n, 3), y = randoms(n, 4);
      std::vector<float> a(n), b(n);
      fast().add_f32(n, x.data(), y.data(), a.data(), relu);
      portable().add_f32(n, x.data(), y.data(), b.data(), relu);
      EXPECT_TRUE(same_bits(a, b)) << "n = " << n << ", relu " << relu;
    }
}

TEST_P(KernelLevel, DropoutIsBitwise) {
  const std::uint64_t threshold = dropout_threshold(0.3);
  for (const Index n : kCounts) {
    const std::vector<float> in = randoms(n, 5);
    std::vector<float> a(n), b(n);
    fast().dropout_f32(in.data(), a.data(), n, 42, 7, threshold, 1.0f / 0.7f);
    portable().dropout_f32(in.data(), b.data(), n, 42, 7, threshold, 1.0f / 0.7f);
    EXPECT_TRUE(same_bits(a, b)) << "f32, n = " << n;
    std::vector<std::uint16_t> in16(n), a16(n), b16(n);
    for (Index i = 0; i < n; ++i) in16[i] = float_to_bf16(in[i]);
    fast().dropout_bf16(in16.data(), a16.data(), n, 42, 7, threshold, 1.0f / 0.7f);
    portable().dropout_bf16(in16.data(), b16.data(), n, 42, 7, threshold, 1.0f / 0.7f);
    EXPECT_TRUE(same_bits(a16, b16)) << "bf16, n = " << n;
  }
}

TEST_P(KernelLevel, CastsAreBitwise) {
  for (const Index n : kCounts) {
    std::vector<float> src = randoms(n, 6, -1e3f, 1e3f);
    const float specials[] = {NAN, INFINITY, -INFINITY, 0x1p-140f, -0.0f, 1.0f + 0x1p-8f};
    for (std::size_t i = 0; i < std::size(specials) && i < src.size(); ++i) src[i] = specials[i];
    std::vector<std::uint16_t> a(n), b(n);
    fast().cast_f32_to_bf16(src.data(), a.data(), n);
    portable().cast_f32_to_bf16(src.data(), b.data(), n);
    EXPECT_TRUE(same_bits(a, b)) << "f32 -> bf16, n = " << n;
    std::vector<float> back_a(n), back_b(n);
    fast().cast_bf16_to_f32(a.data(), back_a.data(), n);
    portable().cast_bf16_to_f32(a.data(), back_b.data(), n);
    EXPECT_TRUE(same_bits(back_a, back_b)) << "bf16 -> f32, n = " << n;
  }
}

// Probabilities: fast_exp's polynomial fused (about 2 ulp) and the row sum in as many lanes
// as the vectors hold: 16 float ulp. bf16 outputs may then round one bf16 ulp (2^-8) apart.
TEST_P(KernelLevel, SoftmaxRowsAgreeToFloatRounding) {
  for (const Index cols : {1, 7, 33, 129, 1000})
    for (const bool masked : {false, true}) {
      const Index rows = 6, rows_per_mask = 2;
      const std::vector<float> src = randoms(rows * cols, 7, -8.0f, 8.0f);
      std::vector<float> mask(rows / rows_per_mask * cols, 0.0f);
      for (std::size_t i = 0; i < mask.size(); i += 3) mask[i] = -10000.0f;
      const float* m = masked ? mask.data() : nullptr;
      std::vector<float> a(rows * cols), b(rows * cols);
      fast().softmax_rows_f32(src.data(), m, a.data(), rows, cols, 0.7f, rows_per_mask);
      portable().softmax_rows_f32(src.data(), m, b.data(), rows, cols, 0.7f, rows_per_mask);
      EXPECT_TRUE(close(a, b, 16 * kFloatUlp, 1e-30)) << "f32, cols " << cols;
      std::vector<std::uint16_t> src16(src.size()), a16(src.size()), b16(src.size());
      for (std::size_t i = 0; i < src.size(); ++i) src16[i] = float_to_bf16(src[i]);
      fast().softmax_rows_bf16(src16.data(), m, a16.data(), rows, cols, 0.7f, rows_per_mask);
      portable().softmax_rows_bf16(src16.data(), m, b16.data(), rows, cols, 0.7f, rows_per_mask);
      std::vector<float> fa(src.size()), fb(src.size());
      for (std::size_t i = 0; i < src.size(); ++i)
        fa[i] = bf16_to_float(a16[i]), fb[i] = bf16_to_float(b16[i]);
      EXPECT_TRUE(close(fa, fb, 0x1p-7, 1e-30)) << "bf16, cols " << cols;
    }
}

TEST_P(KernelLevel, SoftmaxCrossEntropyAgreesToFloatRounding) {
  for (const Index classes : {1, 10, 17, 1000}) {
    const Index rows = 9;
    const std::vector<float> logits = randoms(rows * classes, 8, -5.0f, 5.0f);
    std::vector<std::int32_t> labels(rows);
    for (Index r = 0; r < rows; ++r) labels[r] = static_cast<std::int32_t>((r * 7) % classes);
    std::vector<float> a(rows * classes), b(rows * classes);
    const double loss_a =
        fast().softmax_cross_entropy_f32(logits.data(), labels.data(), a.data(), rows, classes);
    const double loss_b =
        portable().softmax_cross_entropy_f32(logits.data(), labels.data(), b.data(), rows, classes);
    EXPECT_TRUE(close(a, b, 16 * kFloatUlp, 1e-30)) << "classes " << classes;
    EXPECT_NEAR(loss_a, loss_b, 16 * kFloatUlp * (std::fabs(loss_b) + rows)) << classes;
  }
}

// Batch-norm shapes: planes of 1, 63 (3 blocks of 16 and 15), 196 and 3136 values.
struct BnCase {
  Index mb, channels, h, w;
};
const std::vector<BnCase> kBnCases = {{2, 3, 1, 1}, {3, 5, 7, 9}, {4, 8, 14, 14}, {2, 3, 56, 56}};

// Channel c's data centred at 10 c: the two-pass variance has something to cancel.
std::vector<float> channel_data(const BnCase& s, unsigned seed) {
  std::vector<float> x = randoms(s.mb * s.channels * s.h * s.w, seed, -2.0f, 3.0f);
  for (Index n = 0; n < s.mb; ++n)
    for (Index c = 0; c < s.channels; ++c)
      for (Index i = 0; i < s.h * s.w; ++i) x[(n * s.channels + c) * s.h * s.w + i] += 10.0f * c;
  return x;
}

// The statistics are double sums: the mean is bitwise (additions only, the same lanes on
// every level); the variance's squares fuse, a double rounding apart, so its float may round
// one ulp apart, and so may each output, computed in double and rounded once to float.
TEST_P(KernelLevel, BatchNormForwardAgreesToOneUlp) {
  for (const BnCase& c : kBnCases)
    for (const bool relu : {false, true}) {
      const BatchNormShape shape{c.mb, c.channels, c.h * c.w, 1e-5f};
      const Index count = c.mb * c.channels * c.h * c.w;
      const std::vector<float> src = channel_data(c, 9), gamma = randoms(c.channels, 10, 0.5f, 2),
                               beta = randoms(c.channels, 11);
      std::vector<float> dst_a(count), dst_b(count), mean_a(c.channels), mean_b(c.channels),
          var_a(c.channels), var_b(c.channels);
      std::vector<std::int32_t> mask_a(count, 7), mask_b(count, 7);
      fast().batch_norm_forward_f32(shape, src.data(), gamma.data(), beta.data(), dst_a.data(),
                                    mean_a.data(), var_a.data(), relu ? mask_a.data() : nullptr);
      portable().batch_norm_forward_f32(shape, src.data(), gamma.data(), beta.data(), dst_b.data(),
                                        mean_b.data(), var_b.data(),
                                        relu ? mask_b.data() : nullptr);
      const std::string what = "mb " + std::to_string(c.mb) + ", plane " +
                               std::to_string(c.h * c.w) + ", relu " + std::to_string(relu);
      EXPECT_TRUE(same_bits(mean_a, mean_b)) << what;
      EXPECT_TRUE(close(var_a, var_b, kFloatUlp, 0)) << what;
      EXPECT_TRUE(close(dst_a, dst_b, kFloatUlp, 1e-12)) << what;
      if (!relu) continue;
      for (Index i = 0; i < count; ++i) {  // they may differ only within rounding of 0
        if (std::max(dst_a[i], dst_b[i]) > 1e-6f || (dst_a[i] == 0 && dst_b[i] == 0)) {
          ASSERT_EQ(mask_a[i], mask_b[i]) << what << ", element " << i;
        }
      }
    }
}

TEST_P(KernelLevel, BatchNormInferenceAgreesToOneUlp) {
  for (const BnCase& c : kBnCases)
    for (const bool relu : {false, true}) {
      const BatchNormShape shape{c.mb, c.channels, c.h * c.w, 1e-5f};
      const Index count = c.mb * c.channels * c.h * c.w;
      const std::vector<float> src = channel_data(c, 12), gamma = randoms(c.channels, 13, 0.5f, 2),
                               beta = randoms(c.channels, 14),
                               mean = randoms(c.channels, 15, 0.0f, 10.0f * c.channels),
                               var = randoms(c.channels, 16, 0.1f, 3.0f);
      std::vector<float> a(count), b(count);
      fast().batch_norm_inference_f32(shape, src.data(), gamma.data(), beta.data(), mean.data(),
                                      var.data(), a.data(), relu);
      portable().batch_norm_inference_f32(shape, src.data(), gamma.data(), beta.data(), mean.data(),
                                          var.data(), b.data(), relu);
      EXPECT_TRUE(close(a, b, kFloatUlp, 1e-12)) << "plane " << c.h * c.w << ", relu " << relu;
    }
}

// diff_beta is a double sum of (masked) gradients: bitwise. diff_gamma and diff_src fuse in
// double before one rounding to float: one ulp, plus double rounding where the terms cancel.
// Masked-out gradients are infinite here: the mask must drop them, not multiply them by 0.
TEST_P(KernelLevel, BatchNormBackwardAgreesToOneUlp) {
  for (const BnCase& c : kBnCases)
    for (const bool relu : {false, true}) {
      const BatchNormShape shape{c.mb, c.channels, c.h * c.w, 1e-5f};
      const Index count = c.mb * c.channels * c.h * c.w;
      const std::vector<float> src = channel_data(c, 17), gamma = randoms(c.channels, 18, 0.5f, 2);
      std::vector<float> diff_dst = randoms(count, 19), mean(c.channels), var(c.channels);
      std::vector<float> scratch(count);
      portable().batch_norm_forward_f32(shape, src.data(), gamma.data(), gamma.data(),
                                        scratch.data(), mean.data(), var.data(), nullptr);
      std::vector<std::int32_t> mask(count);
      for (Index i = 0; i < count; ++i) mask[i] = (i * 7 + i / 5) % 3 != 0;
      if (relu)
        for (Index i = 0; i < count; i += 11)
          if (!mask[i]) diff_dst[i] = i % 2 ? INFINITY : NAN;
      std::vector<float> dx_a(count), dx_b(count), dg_a(c.channels), dg_b(c.channels),
          db_a(c.channels), db_b(c.channels);
      const std::int32_t* m = relu ? mask.data() : nullptr;
      fast().batch_norm_backward_f32(shape, src.data(), diff_dst.data(), gamma.data(), mean.data(),
                                     var.data(), m, dx_a.data(), dg_a.data(), db_a.data());
      portable().batch_norm_backward_f32(shape, src.data(), diff_dst.data(), gamma.data(),
                                         mean.data(), var.data(), m, dx_b.data(), dg_b.data(),
                                         db_b.data());
      const std::string what =
          "plane " + std::to_string(c.h * c.w) + ", relu " + std::to_string(relu);
      EXPECT_TRUE(same_bits(db_a, db_b)) << what;
      EXPECT_TRUE(close(dg_a, dg_b, kFloatUlp, 1e-9)) << what;
      EXPECT_TRUE(close(dx_a, dx_b, kFloatUlp, 1e-9)) << what;
      if (!relu) continue;
      for (Index i = 0; i < count; ++i) ASSERT_TRUE(std::isfinite(dx_a[i])) << what << ", " << i;
    }
}

struct PoolCase {
  Index mb, channels, ih, iw, kh, kw, sh, sw, ph, pw;
};
// ResNet's 3x3 stride 2 with padding, 2x2 stride 2, 3x3 stride 1, a window wholly in the
// padding (1x1 with padding 1), odd sizes and an asymmetric one.
const std::vector<PoolCase> kPoolCases = {
    {2, 3, 13, 11, 3, 3, 2, 2, 1, 1}, {1, 2, 8, 9, 2, 2, 2, 2, 0, 0},
    {1, 3, 7, 7, 3, 3, 1, 1, 1, 1},   {1, 2, 5, 6, 1, 1, 1, 1, 1, 1},
    {2, 2, 40, 37, 3, 2, 2, 3, 1, 0}, {1, 4, 112, 112, 3, 3, 2, 2, 1, 1}};

PoolShape shape_of(const PoolCase& c) {
  return {c.mb * c.channels,
          c.ih,
          c.iw,
          (c.ih + 2 * c.ph - c.kh) / c.sh + 1,
          (c.iw + 2 * c.pw - c.kw) / c.sw + 1,
          c.kh,
          c.kw,
          c.sh,
          c.sw,
          c.ph,
          c.pw};
}

// Comparisons and copies only: bitwise, ties (values on a coarse grid) and NaN included.
TEST_P(KernelLevel, MaxPoolingIsBitwise) {
  for (const PoolCase& c : kPoolCases) {
    const PoolShape s = shape_of(c);
    std::vector<float> src = randoms(s.planes * s.ih * s.iw, 20, 0.0f, 4.0f);
    for (float& x : src) x = std::floor(x);
    src[5] = NAN;
    const std::size_t outputs = static_cast<std::size_t>(s.planes * s.oh * s.ow);
    std::vector<float> a(outputs), b(outputs);
    std::vector<std::int32_t> at_a(outputs), at_b(outputs);
    fast().max_pool_forward_f32(s, src.data(), a.data(), at_a.data());
    portable().max_pool_forward_f32(s, src.data(), b.data(), at_b.data());
    const std::string what = std::to_string(c.ih) + "x" + std::to_string(c.iw) + ", kernel " +
                             std::to_string(c.kh) + "x" + std::to_string(c.kw);
    EXPECT_TRUE(same_bits(a, b)) << what;
    EXPECT_TRUE(same_bits(at_a, at_b)) << what;
    const std::vector<float> diff = randoms(outputs, 21);
    std::vector<float> dx_a(src.size(), 1.0f), dx_b(src.size(), 2.0f);
    fast().max_pool_backward_f32(s, diff.data(), at_b.data(), dx_a.data());
    portable().max_pool_backward_f32(s, diff.data(), at_b.data(), dx_b.data());
    EXPECT_TRUE(same_bits(dx_a, dx_b)) << what << ", backward";
  }
}

TEST_P(KernelLevel, AveragePoolingIsBitwise) {
  for (const auto& [ih, iw] : std::vector<std::pair<Index, Index>>{{7, 7}, {1, 1}, {17, 3}}) {
    const PoolShape s{37, ih, iw, 1, 1, ih, iw, 1, 1, 0, 0};
    const std::vector<float> src = randoms(s.planes * ih * iw, 22);
    std::vector<float> a(s.planes), b(s.planes);
    fast().average_pool_forward_f32(s, src.data(), a.data());
    portable().average_pool_forward_f32(s, src.data(), b.data());
    EXPECT_TRUE(same_bits(a, b)) << ih << "x" << iw;
    std::vector<float> dx_a(src.size()), dx_b(src.size());
    fast().average_pool_backward_f32(s, a.data(), dx_a.data());
    portable().average_pool_backward_f32(s, a.data(), dx_b.data());
    EXPECT_TRUE(same_bits(dx_a, dx_b)) << ih << "x" << iw << ", backward";
  }
}

// momentum = mu momentum + (g + wd w); w -= lr momentum: each fused step rounds once instead of
// twice, within 2 ulp of its terms' magnitude. Every step starts both from the same state.
TEST_P(KernelLevel, SgdMomentumAgreesToFloatRounding) {
  const float lr = 0.1f, mu = 0.9f, wd = 1e-4f;
  for (const Index n : kCounts) {
    std::vector<float> w = randoms(n, 23), mom = randoms(n, 24, -0.1f, 0.1f);
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> g = randoms(n, 25 + step);
      std::vector<float> w_a = w, w_b = w, m_a = mom, m_b = mom;
      fast().sgd_momentum_f32(n, w_a.data(), g.data(), m_a.data(), lr, mu, wd);
      portable().sgd_momentum_f32(n, w_b.data(), g.data(), m_b.data(), lr, mu, wd);
      for (Index i = 0; i < n; ++i) {
        const double m_scale = std::fabs(mu * mom[i]) + std::fabs(g[i]) + std::fabs(wd * w[i]);
        ASSERT_NEAR(m_a[i], m_b[i], 2 * kFloatUlp * m_scale) << "n " << n << ", element " << i;
        const double w_scale = std::fabs(w[i]) + std::fabs(lr * m_b[i]) + lr * m_scale;
        ASSERT_NEAR(w_a[i], w_b[i], 2 * kFloatUlp * w_scale) << "n " << n << ", element " << i;
      }
      w = w_b, mom = m_b;
    }
  }
}

// A uniform value in [0, 1) from a counter, and the coefficients of an optimizer's step
// (bias corrections for beta1 0.9, beta2 0.999, epsilon 1e-6).
double unit(std::int64_t i) {
  return static_cast<double>(mix64(static_cast<std::uint64_t>(i)) >> 11) * 0x1.0p-53;
}
AdamCoefficients adam_step(float learning_rate, float weight_decay, int step) {
  const float beta1 = 0.9f, beta2 = 0.999f, t = static_cast<float>(step);
  return {learning_rate,
          beta1,
          beta2,
          1e-6f,
          weight_decay,
          1.0f - std::pow(beta1, t),
          1.0f - std::pow(beta2, t)};
}

// The level's AdamW (on avx512 the reciprocal square root and reciprocal refined by Newton
// steps; on avx2 the portable loop with fused multiply-adds) against the portable loop's sqrt
// and division, over gradients from 1e-20 to 100, exact zeros, and moments that stay 0 (an
// embedding row no batch touched): within 1e-6 relative (8 ulp).
TEST_P(KernelLevel, AdamWMatchesThePortableLoop) {
  const std::int64_t n = 4099;  // a tail after the 16-lane blocks
  std::vector<float> grads(n), m(n, 0.0f), v(n, 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    const double u = unit(i);
    grads[i] =
        i % 17 == 0 ? 0.0f : static_cast<float>((i % 2 ? 1 : -1) * std::pow(10.0, -20 + 22 * u));
  }
  for (int step = 1; step <= 3; ++step) {
    const AdamCoefficients k = adam_step(1e-3f, 0.0f, step);
    std::vector<float> fast_w(n, 0.0f), portable_w(n, 0.0f), fast_m = m, fast_v = v;
    fast().adamw_f32(n, fast_w.data(), grads.data(), fast_m.data(), fast_v.data(), k);
    portable().adamw_f32(n, portable_w.data(), grads.data(), m.data(), v.data(), k);
    for (std::int64_t i = 0; i < n; ++i) {  // fused multiply-adds round once: an ulp apart
      ASSERT_NEAR(fast_m[i], m[i], 1e-6 * std::fabs(m[i]));
      ASSERT_NEAR(fast_v[i], v[i], 1e-6 * std::fabs(v[i]));
    }
    m = fast_m, v = fast_v;  // both continue from the same moments
    for (std::int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(fast_w[i], portable_w[i], 1e-6 * std::fabs(portable_w[i]) + 1e-30)
          << "element " << i << ", gradient " << grads[i] << ", step " << step;
  }
}

// The level's LAMB against the portable loop: tensors of 37 (one partial block), 4,100
// (a chunk and a partial one) and 5,000 values, three steps.
TEST_P(KernelLevel, LambMatchesThePortableLoop) {
  const std::vector<std::int32_t> offsets = {0, 37, 4137, 9137};
  const std::int64_t n = offsets.back();
  std::vector<float> grads(n), weights(n), m(n, 0.0f), v(n, 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    const double u = unit(i);
    grads[i] =
        i % 13 == 0 ? 0.0f : static_cast<float>((i % 2 ? 1 : -1) * std::pow(10.0, -8 + 9 * u));
    weights[i] = static_cast<float>(u - 0.5);
  }
  std::vector<float> portable_w = weights, portable_m = m, portable_v = v;
  for (int step = 1; step <= 3; ++step) {
    const AdamCoefficients k = adam_step(2e-3f, 0.01f, step);
    fast().lamb_f32(3, offsets.data(), weights.data(), grads.data(), m.data(), v.data(), k);
    portable().lamb_f32(3, offsets.data(), portable_w.data(), grads.data(), portable_m.data(),
                        portable_v.data(), k);
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(m[i], portable_m[i], 1e-6 * std::fabs(portable_m[i])) << i;
      ASSERT_NEAR(v[i], portable_v[i], 1e-6 * std::fabs(portable_v[i])) << i;
      // The step moves each weight by about lr = 2e-3: agree to 1e-4 of that.
      ASSERT_NEAR(weights[i], portable_w[i], 2e-7 + 1e-6 * std::fabs(portable_w[i])) << i;
    }
  }
}

// Copies and additions in the same order: bitwise, over strides 1 to 3, padding 0 to 3 and
// kernels from 1x1 to 7x7.
TEST_P(KernelLevel, Im2colAndCol2imAreBitwise) {
  const std::vector<ConvShape> cases = {
      {3, 11, 13, 0, 0, 3, 3, 1, 1, 1, 1}, {2, 12, 9, 0, 0, 3, 3, 2, 2, 1, 1},
      {3, 17, 19, 0, 0, 7, 7, 2, 2, 3, 3}, {4, 10, 10, 0, 0, 1, 1, 2, 2, 0, 0},
      {2, 9, 23, 0, 0, 5, 2, 1, 3, 2, 0},  {16, 56, 56, 0, 0, 3, 3, 1, 1, 1, 1}};
  for (ConvShape s : cases) {
    s.oh = (s.ih + 2 * s.ph - s.kh) / s.sh + 1;
    s.ow = (s.iw + 2 * s.pw - s.kw) / s.sw + 1;
    const std::vector<float> image = randoms(s.ic * s.ih * s.iw, 30);
    const std::size_t columns = static_cast<std::size_t>(s.ic * s.kh * s.kw * s.oh * s.ow);
    std::vector<float> a(columns, 5.0f), b(columns, 6.0f);
    fast().im2col_f32(s, image.data(), a.data());
    portable().im2col_f32(s, image.data(), b.data());
    const std::string what = std::to_string(s.kh) + "x" + std::to_string(s.kw) + " stride " +
                             std::to_string(s.sw) + " padding " + std::to_string(s.pw);
    EXPECT_TRUE(same_bits(a, b)) << what;
    const std::vector<float> col = randoms(columns, 31);
    std::vector<float> img_a(image.size(), 0.0f), img_b(image.size(), 0.0f);
    fast().col2im_f32(s, col.data(), img_a.data());
    portable().col2im_f32(s, col.data(), img_b.data());
    EXPECT_TRUE(same_bits(img_a, img_b)) << what << ", col2im";
  }
}

// copy, scale and add: bitwise; triad fuses (one double rounding instead of two); dot sums in
// as many lanes as the vectors hold: 1e-12 of the sum of |a b|.
TEST_P(KernelLevel, StreamAgreesWithThePortableLoop) {
  const Index n = 1000003;
  std::vector<double> a(n), b(n), c(n);
  std::mt19937_64 rng(32);
  std::uniform_real_distribution<double> u(-1, 1);
  for (Index i = 0; i < n; ++i) a[i] = u(rng), b[i] = u(rng), c[i] = u(rng);
  const double s = 3.0;
  std::vector<double> x(n), y(n);
  fast().stream_copy(a.data(), x.data(), n);
  portable().stream_copy(a.data(), y.data(), n);
  EXPECT_TRUE(same_bits(x, y)) << "copy";
  fast().stream_scale(x.data(), c.data(), s, n);
  portable().stream_scale(y.data(), c.data(), s, n);
  EXPECT_TRUE(same_bits(x, y)) << "scale";
  fast().stream_add(a.data(), b.data(), x.data(), n);
  portable().stream_add(a.data(), b.data(), y.data(), n);
  EXPECT_TRUE(same_bits(x, y)) << "add";
  fast().stream_triad(x.data(), b.data(), c.data(), s, n);
  portable().stream_triad(y.data(), b.data(), c.data(), s, n);
  for (Index i = 0; i < n; ++i)
    ASSERT_NEAR(x[i], y[i], 2 * DBL_EPSILON * (std::fabs(b[i]) + std::fabs(s * c[i]))) << i;
  double magnitude = 0;
  for (Index i = 0; i < n; ++i) magnitude += std::fabs(a[i] * b[i]);
  EXPECT_NEAR(fast().stream_dot(a.data(), b.data(), n),
              portable().stream_dot(a.data(), b.data(), n), 1e-12 * magnitude);
}

INSTANTIATE_TEST_SUITE_P(Levels, KernelLevel, ::testing::Values(Isa::avx2, Isa::avx512),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(isa_name(info.param));
                         });

using testing_support::ScopedEnv;

TEST(KernelSelection, TheCapChoosesTheLevel) {
  Isa isa = Isa::avx512;
  ASSERT_TRUE(choose_isa("portable", &isa).ok());
  EXPECT_EQ(isa, Isa::portable);
  ASSERT_TRUE(choose_isa("", &isa).ok());
  EXPECT_EQ(isa, supported_isas().back());
  const Status bogus = choose_isa("bogus", &isa);
  EXPECT_EQ(bogus.code(), StatusCode::invalid_argument);
  EXPECT_NE(bogus.message().find("TRAINBENCH_MAX_ISA=bogus"), std::string::npos);
  EXPECT_NE(bogus.message().find("avx512"), std::string::npos) << bogus.message();
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "this CPU lacks " << level_label(Isa::avx2);
  ASSERT_TRUE(choose_isa("avx2", &isa).ok());
  EXPECT_EQ(isa, Isa::avx2);
  EXPECT_EQ(cpu_kernels(Isa::avx2).isa, Isa::avx2);
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "this CPU lacks " << level_label(Isa::avx512);
  ASSERT_TRUE(choose_isa("avx512", &isa).ok());
  EXPECT_EQ(isa, Isa::avx512);
}

// Batch norm forward, f32, 2 x 3 x 5 x 7, through a plan made under TRAINBENCH_MAX_ISA=level.
struct BatchNormRun {
  std::string implementation;
  bool reference = false;
  std::vector<float> dst;
};
BatchNormRun run_batch_norm_plan(DType dtype = DType::f32) {
  BatchNormOp op;
  op.mb = 2, op.channels = 3, op.h = 5, op.w = 7, op.dtype = dtype;
  std::unique_ptr<Plan> plan;
  EXPECT_TRUE(plan_shared_training_op(op, &plan).ok());
  if (!plan) return {};
  BatchNormRun run{plan->implementation(), plan->is_reference(), {}};
  if (dtype != DType::f32) return run;
  const Index count = op.mb * op.channels * op.h * op.w;
  std::vector<float> src = randoms(count, 40), gamma(3, 1.5f), beta(3, 0.25f), mean(3), variance(3),
                     running_mean(3, 0.0f), running_var(3, 1.0f);
  run.dst.resize(count);
  const Buffer buffers[] = {{src.data()},          {gamma.data()},      {beta.data()},
                            {run.dst.data()},      {mean.data()},       {variance.data()},
                            {running_mean.data()}, {running_var.data()}};
  EXPECT_TRUE(static_cast<CpuPlan&>(*plan).run(buffers, Buffer{}).ok());
  return run;
}

TEST(KernelSelection, APlanNamesAndRunsItsLevel) {
  for (const Isa isa : supported_isas()) {
    const ScopedEnv cap("TRAINBENCH_MAX_ISA", std::string(isa_name(isa)).c_str());
    const std::string level(isa_name(isa));
    const BatchNormRun run = run_batch_norm_plan();
    EXPECT_EQ(run.implementation, "shared CPU batch norm (f32, plain layout, " + level + ")");
    EXPECT_EQ(run.reference, isa == Isa::portable && supported_isas().size() > 1);
    // What ran is that level's table.
    BatchNormShape shape{2, 3, 35, 1e-5f};
    const std::vector<float> src = randoms(210, 40), gamma(3, 1.5f), beta(3, 0.25f);
    std::vector<float> dst(210), mean(3), variance(3);
    cpu_kernels(isa).batch_norm_forward_f32(shape, src.data(), gamma.data(), beta.data(),
                                            dst.data(), mean.data(), variance.data(), nullptr);
    EXPECT_TRUE(same_bits(run.dst, dst)) << level;
    // The f64 reference names no level: it runs its own loops.
    EXPECT_EQ(run_batch_norm_plan(DType::f64).implementation,
              "shared CPU batch norm (f64, plain layout)");
    std::unique_ptr<Plan> stream;
    ASSERT_TRUE(plan_stream(StreamOp{StreamKernel::triad, 1000, 3.0}, &stream).ok());
    EXPECT_EQ(stream->implementation(), "openmp static loop, ordinary stores, " + level);
  }
}

TEST(KernelSelection, AMalformedCapIsAnError) {
  const ScopedEnv cap("TRAINBENCH_MAX_ISA", "avx9000");
  std::unique_ptr<Plan> plan;
  BatchNormOp op;
  const Status status = plan_shared_training_op(op, &plan);
  EXPECT_EQ(status.code(), StatusCode::invalid_argument);
  EXPECT_NE(status.message().find("TRAINBENCH_MAX_ISA=avx9000"), std::string::npos)
      << status.message();
  EXPECT_EQ(plan_stream(StreamOp{StreamKernel::triad, 1000, 3.0}, &plan).code(),
            StatusCode::invalid_argument);
}

}  // namespace
}  // namespace tb::cpu
