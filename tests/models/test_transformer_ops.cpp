// The ops BERT needs beyond ResNet's: the shared f64 reference against central differences
// of its own forward, cpu-onednn's fp32 plans against the reference, and the AdamW update
// against its closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "backends/operands.h"
#include "tests/models/support.h"

namespace tb {
namespace {

using testing_support::make_backend;
using testing_support::make_cpu_backend;
using testing_support::random;
using testing_support::run_op;

class TransformerOps : public testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cpu_backend();
    if (!backend_) GTEST_SKIP() << "no CPU backend in this build";
  }

  // loss(inputs) = sum_i weights_i * forward(inputs)[output]_i, in f64.
  double loss(const OpDesc& forward, const std::vector<std::vector<double>>& inputs, int output,
              const std::vector<double>& weights) {
    const auto outputs = run_op(*backend_, forward, inputs);
    double sum = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) sum += weights[i] * outputs.at(output)[i];
    return sum;
  }

  // The analytic gradient `analytic` of loss with respect to input `wrt`, against central
  // differences at a spread of entries.
  void expect_matches_differences(const OpDesc& forward, std::vector<std::vector<double>> inputs,
                                  int output, const std::vector<double>& weights, int wrt,
                                  const std::vector<double>& analytic, const char* what) {
    const double h = 1e-6;
    const std::size_t n = inputs[wrt].size();
    for (std::size_t k = 0; k < 12; ++k) {
      const std::size_t i = (k * 7919 + 3) % n;
      const double saved = inputs[wrt][i];
      inputs[wrt][i] = saved + h;
      const double up = loss(forward, inputs, output, weights);
      inputs[wrt][i] = saved - h;
      const double down = loss(forward, inputs, output, weights);
      inputs[wrt][i] = saved;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(analytic.at(i), numeric, 1e-6 + 1e-5 * std::fabs(numeric))
          << what << " entry " << i;
    }
  }

  std::unique_ptr<Backend> backend_;
};

TEST_F(TransformerOps, LayerNormBackwardMatchesDifferencesAndOneDnnAgrees) {
  LayerNormOp op{.rows = 6, .cols = 40, .epsilon = 1e-12f, .dtype = DType::f64};
  const std::vector<double> src = random(240, 1), gamma = random(40, 2), beta = random(40, 3),
                            r = random(240, 4);
  const auto forward = run_op(*backend_, op, {src, gamma, beta});
  LayerNormOp backward = op;
  backward.pass = Pass::backward;
  const auto grads =
      run_op(*backend_, backward, {src, r, gamma, beta, forward.at(4), forward.at(5)});
  expect_matches_differences(op, {src, gamma, beta}, 3, r, 0, grads.at(6), "diff_src");
  expect_matches_differences(op, {src, gamma, beta}, 3, r, 1, grads.at(7), "diff_gamma");
  expect_matches_differences(op, {src, gamma, beta}, 3, r, 2, grads.at(8), "diff_beta");
  // The library's fp32 plans against the reference.
  LayerNormOp f32 = op, f32_backward = backward;
  f32.dtype = f32_backward.dtype = DType::f32;
  f32.epsilon = f32_backward.epsilon = 1e-5f;  // fp32 cannot resolve BERT's 1e-12 here anyway
  op.epsilon = backward.epsilon = 1e-5f;
  const auto want = run_op(*backend_, op, {src, gamma, beta});
  const auto got = run_op(*backend_, f32, {src, gamma, beta});
  EXPECT_LT(relative_l2_error(got.at(3), want.at(3)), 1e-5);
  const auto want_grads =
      run_op(*backend_, backward, {src, r, gamma, beta, want.at(4), want.at(5)});
  const auto got_grads =
      run_op(*backend_, f32_backward, {src, r, gamma, beta, want.at(4), want.at(5)});
  for (int k : {6, 7, 8})
    EXPECT_LT(relative_l2_error(got_grads.at(k), want_grads.at(k)), 1e-5) << k;
}

// RMSNorm (backends/ops/rms_norm.h): the f64 op is y = x r gamma with r the inverse root mean
// square of its row; its backward matches central differences of that forward, and the f32 and
// bf16 plans agree with it to their rounding.
TEST_F(TransformerOps, RmsNormMatchesItsDefinitionAndDifferencesAndFloatAgrees) {
  const RmsNormOp op{.rows = 6, .cols = 40, .epsilon = 1e-6f, .dtype = DType::f64};
  RmsNormOp backward = op;
  backward.pass = Pass::backward;
  const std::vector<double> src = random(240, 11), gamma = random(40, 12), r = random(240, 13);
  const std::vector<OperandSpec> specs = rms_norm_operands(op), back = rms_norm_operands(backward);
  auto at = [](const std::vector<OperandSpec>& list, const char* name) {
    return static_cast<std::size_t>(operand_index(list, name));
  };
  const auto forward = run_op(*backend_, op, {src, gamma});
  for (std::int64_t row = 0; row < op.rows; ++row) {
    double squares = 0;
    for (std::int64_t c = 0; c < op.cols; ++c) squares += src[row * 40 + c] * src[row * 40 + c];
    const double inverse = 1 / std::sqrt(squares / 40 + 1e-6);
    EXPECT_NEAR(forward.at(at(specs, "inverse_rms"))[row], inverse, 1e-12 * inverse);
    for (std::int64_t c = 0; c < op.cols; ++c)
      EXPECT_NEAR(forward.at(at(specs, "dst"))[row * 40 + c],
                  src[row * 40 + c] * inverse * gamma[c], 1e-12);
  }
  const auto grads =
      run_op(*backend_, backward, {src, r, gamma, forward.at(at(specs, "inverse_rms"))});
  const int dst = static_cast<int>(at(specs, "dst"));
  expect_matches_differences(op, {src, gamma}, dst, r, 0, grads.at(at(back, "diff_src")),
                             "diff_src");
  expect_matches_differences(op, {src, gamma}, dst, r, 1, grads.at(at(back, "diff_gamma")),
                             "diff_gamma");
  for (const auto& [dtype, tolerance] : {std::pair{DType::f32, 1e-6}, {DType::bf16, 1e-2}}) {
    RmsNormOp low = op, low_backward = backward;
    low.dtype = low_backward.dtype = dtype;
    const auto got = run_op(*backend_, low, {src, gamma});
    EXPECT_LT(relative_l2_error(got.at(at(specs, "dst")), forward.at(at(specs, "dst"))), tolerance)
        << dtype_name(dtype);
    const auto got_grads =
        run_op(*backend_, low_backward, {src, r, gamma, forward.at(at(specs, "inverse_rms"))});
    for (const char* name : {"diff_src", "diff_gamma"})
      EXPECT_LT(relative_l2_error(got_grads.at(at(back, name)), grads.at(at(back, name))),
                tolerance)
          << dtype_name(dtype) << " " << name;
  }
}

TEST_F(TransformerOps, GeluBackwardMatchesDifferencesAndOneDnnAgrees) {
  EltwiseOp op{.kind = EltwiseKind::gelu, .count = 500, .dtype = DType::f64};
  std::vector<double> src = random(500, 5);
  for (double& x : src) x *= 4;  // cover the curved part and both tails
  const std::vector<double> r = random(500, 6);
  EltwiseOp backward = op;
  backward.pass = Pass::backward;
  const auto grads = run_op(*backend_, backward, {src, r});
  expect_matches_differences(op, {src}, 1, r, 0, grads.at(2), "gelu");
  EltwiseOp f32 = op, f32_backward = backward;
  f32.dtype = f32_backward.dtype = DType::f32;
  EXPECT_LT(
      relative_l2_error(run_op(*backend_, f32, {src}).at(1), run_op(*backend_, op, {src}).at(1)),
      1e-6);
  EXPECT_LT(relative_l2_error(run_op(*backend_, f32_backward, {src, r}).at(2), grads.at(2)), 1e-6);
}

TEST_F(TransformerOps, TanhBackwardMatchesDifferencesAndOneDnnAgrees) {
  EltwiseOp op{.kind = EltwiseKind::tanh, .count = 300, .dtype = DType::f64};
  std::vector<double> src = random(300, 21);
  for (double& x : src) x *= 3;
  const std::vector<double> r = random(300, 22);
  const auto forward = run_op(*backend_, op, {src});
  EltwiseOp backward = op;
  backward.pass = Pass::backward;
  const auto grads = run_op(*backend_, backward, {forward.at(1), r});
  expect_matches_differences(op, {src}, 1, r, 0, grads.at(2), "tanh");
  EltwiseOp f32 = op, f32_backward = backward;
  f32.dtype = f32_backward.dtype = DType::f32;
  EXPECT_LT(relative_l2_error(run_op(*backend_, f32, {src}).at(1), forward.at(1)), 1e-6);
  EXPECT_LT(
      relative_l2_error(run_op(*backend_, f32_backward, {forward.at(1), r}).at(2), grads.at(2)),
      1e-6);
}

TEST_F(TransformerOps, MaskedSoftmaxBackwardMatchesDifferences) {
  // 2 sequences x 3 rows each (heads x queries) over 8 keys; the mask drops keys 6 and 7 of
  // the second sequence.
  SoftmaxOp op{.rows = 6,
               .cols = 8,
               .scale = 0.35f,
               .masked = true,
               .rows_per_mask = 3,
               .dtype = DType::f64};
  std::vector<double> mask(16, 0.0);
  mask[8 + 6] = mask[8 + 7] = -10000.0;
  const std::vector<double> src = random(48, 7), r = random(48, 8);
  const auto forward = run_op(*backend_, op, {src, mask});
  for (int row = 3; row < 6; ++row) EXPECT_LT(forward.at(2)[row * 8 + 7], 1e-4);
  for (int row = 0; row < 6; ++row) {
    double sum = 0;
    for (int c = 0; c < 8; ++c) sum += forward.at(2)[row * 8 + c];
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  SoftmaxOp backward = op;
  backward.pass = Pass::backward;
  const auto grads = run_op(*backend_, backward, {forward.at(2), r});
  expect_matches_differences(op, {src, mask}, 2, r, 0, grads.at(2), "softmax");
}

TEST_F(TransformerOps, EmbeddingGathersAndScatterAdds) {
  EmbeddingOp op{.tokens = 5, .vocab = 4, .dim = 3, .dtype = DType::f64};
  const std::vector<double> table = random(12, 9), ids = {2, 0, 2, 3, 2};
  const auto gathered = run_op(*backend_, op, {table, ids});
  for (int t = 0; t < 5; ++t)
    for (int d = 0; d < 3; ++d)
      EXPECT_EQ(gathered.at(2)[t * 3 + d], table[static_cast<int>(ids[t]) * 3 + d]);
  EmbeddingOp backward = op;
  backward.pass = Pass::backward;
  const std::vector<double> diff = random(15, 10);
  const auto scattered = run_op(*backend_, backward, {diff, ids});
  for (int d = 0; d < 3; ++d) {
    EXPECT_DOUBLE_EQ(scattered.at(2)[2 * 3 + d],
                     diff[0 * 3 + d] + diff[2 * 3 + d] + diff[4 * 3 + d]);
    EXPECT_DOUBLE_EQ(scattered.at(2)[1 * 3 + d], 0.0);  // token id 1 never appears
  }
}

TEST_F(TransformerOps, AdamWFirstStepHasItsClosedForm) {
  // From m = v = 0, one step: m_hat = g, v_hat = g^2, so
  // w1 = w0 (1 - lr wd) - lr g / (|g| + eps).
  const std::vector<double> weights = random(64, 11), grads = random(64, 12), zeros(64, 0.0);
  const float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-6f, wd = 0.01f;
  OptimizerOp op{.kind = OptimizerKind::adamw, .count = 64, .dtype = DType::f64};
  const auto out =
      run_op(*backend_, op, {weights, grads, zeros, zeros, {lr, beta1, beta2, eps, wd, 1}});
  for (int i = 0; i < 64; ++i) {
    const double expected = weights[i] * (1 - double{lr} * wd) -
                            double{lr} * grads[i] / (std::fabs(grads[i]) + double{eps});
    EXPECT_NEAR(out.at(0)[i], expected, 1e-12) << i;
    EXPECT_NEAR(out.at(2)[i], (1 - double{beta1}) * grads[i], 1e-12);
  }
}

TEST_F(TransformerOps, DropoutRegeneratesItsMaskInBackward) {
  const std::int64_t n = 20000;
  DropoutOp op{.count = n, .probability = 0.1f, .seed = 77, .dtype = DType::f64};
  const std::vector<double> src = random(n, 13), diff = random(n, 14);
  const auto forward = run_op(*backend_, op, {src, {5}});
  DropoutOp backward = op;
  backward.pass = Pass::backward;
  const auto grads = run_op(*backend_, backward, {diff, {5}});
  std::int64_t dropped = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const bool kept = forward.at(2)[i] != 0;
    dropped += !kept;
    // The same elements are dropped in both passes; the kept ones are scaled by 1 / (1 - p).
    EXPECT_EQ(grads.at(2)[i] != 0, kept) << i;
    if (kept) {
      EXPECT_NEAR(forward.at(2)[i], src[i] / 0.9, 1e-6);  // p is a float: 0.1f
      EXPECT_NEAR(grads.at(2)[i], diff[i] / 0.9, 1e-6);
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.1, 0.01);
  // Another step draws another mask; the same step the same one.
  const auto other = run_op(*backend_, op, {src, {6}});
  const auto again = run_op(*backend_, op, {src, {5}});
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < n; ++i) differ += (other.at(2)[i] == 0) != (forward.at(2)[i] == 0);
  EXPECT_GT(differ, n / 20);
  EXPECT_EQ(again.at(2), forward.at(2));
}

TEST_F(TransformerOps, LambFirstStepHasItsClosedForm) {
  // Two tensors (40 and 24 values). First step: u = g / (|g| + eps) + wd w per element,
  // r = |w| / |u| per tensor, w1 = w0 - lr r u.
  const std::vector<double> weights = random(64, 15), grads = random(64, 16), zeros(64, 0.0);
  const float lr = 2e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-6f, wd = 0.01f;
  OptimizerOp op{.kind = OptimizerKind::lamb, .count = 64, .tensors = 2, .dtype = DType::f64};
  const auto out = run_op(
      *backend_, op, {weights, grads, zeros, zeros, {0, 40, 64}, {lr, beta1, beta2, eps, wd, 1}});
  for (auto [begin, end] : {std::pair{0, 40}, {40, 64}}) {
    double weight_norm = 0, update_norm = 0;
    std::vector<double> u(64);
    for (int i = begin; i < end; ++i) {
      u[i] = grads[i] / (std::fabs(grads[i]) + double{eps}) + double{wd} * weights[i];
      weight_norm += weights[i] * weights[i];
      update_norm += u[i] * u[i];
    }
    const double ratio = std::sqrt(weight_norm / update_norm);
    for (int i = begin; i < end; ++i)
      EXPECT_NEAR(out.at(0)[i], weights[i] - double{lr} * ratio * u[i], 1e-12) << i;
  }
}

// Attention's GEMMs over (batch, head) on operands stored as linear layers write them,
// [batch, seq, heads, head_dim]: the f64 reference against explicit index arithmetic, and
// every CPU backend's fp32 against the reference, for the forward and backward products.
TEST(AttentionGemm, HeadInterleavedOperandsOnEveryCpuBackend) {
  const std::int64_t batch = 2, heads = 3, seq = 5, dim = 4;
  const std::vector<double> q = random(batch * seq * heads * dim, 31),
                            k = random(batch * seq * heads * dim, 32),
                            p = random(batch * heads * seq * seq, 33);
  auto interleaved = [&](const std::vector<double>& x, std::int64_t b, std::int64_t s,
                         std::int64_t h,
                         std::int64_t d) { return x[((b * seq + s) * heads + h) * dim + d]; };
  GemmOp base;
  base.a_type = base.b_type = base.c_type = DType::f64;
  base.batch = batch, base.heads = heads;
  // scores[b, h, i, j] = sum_d Q[b, i, h, d] K[b, j, h, d]
  GemmOp scores = base;
  scores.m = seq, scores.n = seq, scores.k = dim, scores.trans_b = true;
  scores.a_interleaved = scores.b_interleaved = true;
  // context[b, i, h, d] = sum_j P[b, h, i, j] V[b, j, h, d]  (V = K here)
  GemmOp context = base;
  context.m = seq, context.n = dim, context.k = seq;
  context.b_interleaved = context.c_interleaved = true;
  // dK-like: [b, j, h, d] = sum_i P[b, h, i, j] Q[b, i, h, d]  (A transposed, contiguous)
  GemmOp transposed = context;
  transposed.trans_a = true;
  auto reference_backend = make_cpu_backend();
  if (!reference_backend) GTEST_SKIP() << "no CPU backend in this build";
  const auto s = run_op(*reference_backend, scores, {q, k}).at(2);
  const auto c = run_op(*reference_backend, context, {p, k}).at(2);
  const auto t = run_op(*reference_backend, transposed, {p, q}).at(2);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < seq; ++i) {
        for (std::int64_t j = 0; j < seq; ++j) {
          double want = 0;
          for (std::int64_t d = 0; d < dim; ++d)
            want += interleaved(q, b, i, h, d) * interleaved(k, b, j, h, d);
          EXPECT_NEAR(s[((b * heads + h) * seq + i) * seq + j], want, 1e-12);
        }
        for (std::int64_t d = 0; d < dim; ++d) {
          double want = 0, want_t = 0;
          for (std::int64_t j = 0; j < seq; ++j) {
            want += p[((b * heads + h) * seq + i) * seq + j] * interleaved(k, b, j, h, d);
            want_t += p[((b * heads + h) * seq + j) * seq + i] * interleaved(q, b, j, h, d);
          }
          EXPECT_NEAR(c[((b * seq + i) * heads + h) * dim + d], want, 1e-12);
          EXPECT_NEAR(t[((b * seq + i) * heads + h) * dim + d], want_t, 1e-12);
        }
      }
  for (const char* name : {"cpu-onednn", "cpu-openblas", "cuda"}) {  // cuda where usable
    auto backend = make_backend(name);
    if (!backend) continue;
    for (auto [op, inputs, want] : {std::tuple{scores, std::vector{q, k}, s},
                                    {context, std::vector{p, k}, c},
                                    {transposed, std::vector{p, q}, t}}) {
      op.a_type = op.b_type = op.c_type = DType::f32;
      EXPECT_LT(relative_l2_error(run_op(*backend, op, inputs).at(2), want), 1e-6) << name;
    }
  }
}

}  // namespace
}  // namespace tb
