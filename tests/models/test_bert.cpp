// BERT pre-training: the model as HuggingFace builds it, its step against the double-precision
// reference (itself checked against central differences), on every CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "backends/reference/reference_backend.h"
#include "backends/seeded.h"
#include "models/bert.h"
#include "models/reference_check.h"
#include "models/training_step.h"
#include "tests/models/support.h"
#include "workloads/registry.h"
#include "workloads/training_workload.h"

namespace tb {
namespace {

using testing_support::make_backend;
using testing_support::make_cpu_backend;

// Small enough for a finite-difference check in f64, with every layer kind and padding.
BertConfig micro() {
  BertConfig c;
  c.layers = 1, c.hidden = 16, c.heads = 2, c.intermediate = 32;
  c.vocab = 40, c.positions = 16, c.batch = 2, c.sequence = 8, c.predictions = 3;
  return c;
}

TEST(Bert, ParameterCountsNamesAndWorkMatchHuggingFace) {
  const Network base = build_bert(bert_config("base", 8, 128));
  EXPECT_EQ(base.parameter_count(), 110'106'428);
  EXPECT_EQ(build_bert(bert_config("large", 1, 512)).parameter_count(), 336'226'108);
  std::map<std::string, std::vector<std::int64_t>> dims;
  for (const Parameter& p : base.parameters()) dims[p.name] = p.dims;
  EXPECT_EQ(dims.at("bert.embeddings.word_embeddings.weight"),
            (std::vector<std::int64_t>{30522, 768}));
  EXPECT_EQ(dims.at("bert.encoder.layer.11.attention.self.key.bias"),
            (std::vector<std::int64_t>{768}));
  EXPECT_EQ(dims.at("bert.encoder.layer.0.intermediate.dense.weight"),
            (std::vector<std::int64_t>{3072, 768}));
  EXPECT_EQ(dims.at("cls.predictions.transform.LayerNorm.weight"),
            (std::vector<std::int64_t>{768}));
  EXPECT_EQ(dims.at("cls.predictions.bias"), (std::vector<std::int64_t>{30522}));
  EXPECT_EQ(dims.at("cls.seq_relationship.weight"), (std::vector<std::int64_t>{2, 768}));
  EXPECT_EQ(dims.count("cls.predictions.decoder.weight"), 0u);  // tied: counted once
  // 69.9 GFLOP per sequence at length 128 with 20 predictions (the documented formula).
  const double s = 128, h = 768, f = 3072, p = 20, v = 30522;
  const double formula = 6 * (12 * (4 * s * h * h + 2 * s * h * f + 2 * s * s * h) + h * h +
                              p * h * h + p * h * v + 2 * h);
  EXPECT_NEAR(training_flops_per_sample(base), formula, 1e-6 * formula);
  EXPECT_NEAR(formula, 69.9e9, 0.05e9);
  EXPECT_EQ(bert_config("base", 1, 512).predictions, 76);
  EXPECT_THROW(bert_config("huge", 1, 128), UsageError);
  EXPECT_THROW(bert_config("base", 1, 513), UsageError);
  BertConfig bad = micro();
  bad.heads = 3;
  EXPECT_THROW(build_bert(bad), UsageError);
}

// Masked-LM only (as ttt-mlm trains): no pooler, no next-sentence head, no inputs for them;
// every other parameter as in the full model.
TEST(Bert, MaskedLmOnlyDropsThePoolerAndNextSentenceHead) {
  BertConfig full = micro(), mlm = micro();
  mlm.next_sentence = false;
  const Network with = build_bert(full), without = build_bert(mlm);
  const std::int64_t h = full.hidden;
  EXPECT_EQ(without.parameter_count(), with.parameter_count() - (h * h + h) - (2 * h + 2));
  std::set<std::string> names;
  for (const Parameter& p : without.parameters()) names.insert(p.name);
  EXPECT_EQ(names.count("bert.pooler.dense.weight"), 0u);
  EXPECT_EQ(names.count("cls.seq_relationship.weight"), 0u);
  EXPECT_EQ(names.count("cls.predictions.transform.dense.weight"), 1u);
  std::vector<std::string> batch_names;
  for (const NamedTensor& t : bert_batch(mlm, 3)) batch_names.push_back(t.name);
  EXPECT_EQ(batch_names,
            (std::vector<std::string>{"input_ids", "token_type_ids", "position_ids",
                                      "attention_mask", "masked_lm_rows", "masked_lm_labels"}));
  auto backend = make_backend("cpu-onednn");
  if (!backend) GTEST_SKIP() << "cpu-onednn is not in this build";
  std::unique_ptr<TrainingStep> step;
  const Status status =
      prepared_step(*backend, without, {DType::f32}, bert_batch(mlm, 3), 5, &step);
  ASSERT_TRUE(status.ok()) << status.message();
  OpCheck check;
  ASSERT_TRUE(step->check_ops(&check).ok());
  EXPECT_TRUE(check.passed) << check.worst_output << " " << check.worst_error;
}

TEST(Bert, BatchHasDistinctMaskedPositionsInsideEachLength) {
  const BertConfig c = bert_config("tiny", 4, 64);
  const std::vector<NamedTensor> batch = bert_batch(c, 7, /*padded=*/true);
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : batch) by_name[t.name] = &t;
  const std::vector<double>& mask = by_name.at("attention_mask")->values;
  const std::vector<double>& rows = by_name.at("masked_lm_rows")->values;
  bool some_padding = false;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    std::set<double> seen;
    for (std::int64_t k = 0; k < c.predictions; ++k) {
      const double row = rows[b * c.predictions + k];
      EXPECT_TRUE(seen.insert(row).second) << "position repeated";
      EXPECT_GE(row, b * c.sequence);
      EXPECT_LT(row, (b + 1) * c.sequence);
      EXPECT_EQ(mask[static_cast<std::size_t>(row)], 0.0) << "masked position in the padding";
    }
    some_padding |= mask[(b + 1) * c.sequence - 1] != 0.0;
  }
  EXPECT_TRUE(some_padding);
  EXPECT_EQ(by_name.at("token_type_ids")->values[c.sequence - 1], 1.0);
  EXPECT_EQ(by_name.at("token_type_ids")->values[0], 0.0);
}

// The reference itself: gradients against central differences of its own loss, for an entry
// of every parameter (dropout on: its mask depends on the step number, not on the values).
TEST(BertReference, GradientsMatchFiniteDifferences) {
  auto backend = make_cpu_backend();
  if (!backend) GTEST_SKIP() << "no CPU backend in this build";
  const BertConfig c = micro();
  testing_support::FiniteDifferences probe(*backend, build_bert(c), bert_batch(c, 3, true), 5);
  int checked = 0;
  for (const NamedTensor& grad : probe.gradients()) {
    const std::size_t index = mix64(checked++) % grad.values.size();
    const double numeric = probe.derivative(grad.name, index, 1e-5);
    EXPECT_NEAR(grad.values[index], numeric, 1e-7 + 1e-5 * std::fabs(numeric))
        << grad.name << "[" << index << "]";
  }
  EXPECT_EQ(checked, 30);  // every parameter of one layer, the embeddings and the heads
}

class BertStepTest : public testing::TestWithParam<const char*> {};

// fp32 against the f64 reference on the tiny configuration, padded, dropout on.
TEST_P(BertStepTest, GradientsMatchTheDoublePrecisionReference) {
  auto backend = make_backend(GetParam());
  if (!backend) GTEST_SKIP() << GetParam() << " is not in this build or not usable here";
  const BertConfig c = bert_config("tiny", 2, 32);
  ReferenceComparison result;
  const Status status = compare_with_reference(*backend, build_bert(c), {DType::f32},
                                               bert_batch(c, 11, true), 13, &result);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_NEAR(result.loss, result.reference_loss, 1e-5 * result.reference_loss);
  EXPECT_LT(result.worst_gradient_error, 1e-4) << result.worst_parameter;
  std::printf("worst relative gradient error %.3g (%s) over %lld parameters\n",
              result.worst_gradient_error, result.worst_parameter.c_str(),
              static_cast<long long>(result.parameters_checked));
}

TEST_P(BertStepTest, EveryOpMatchesTheReferenceOnItsOwnInputs) {
  auto backend = make_backend(GetParam());
  if (!backend) GTEST_SKIP() << GetParam() << " is not in this build or not usable here";
  const BertConfig c = bert_config("tiny", 2, 32);
  testing_support::expect_ops_match_reference(*backend, build_bert(c), {}, bert_batch(c, 17, true),
                                              150);
}

// Both optimizers train: the loss falls on a fixed batch.
TEST_P(BertStepTest, LossFallsWithAdamWAndLamb) {
  auto backend = make_backend(GetParam());
  if (!backend) GTEST_SKIP() << GetParam() << " is not in this build or not usable here";
  BertConfig c = bert_config("tiny", 4, 32);
  c.dropout = 0;
  const Network net = build_bert(c);
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::lamb}) {
    StepOptions options;
    options.optimizer = kind;
    std::unique_ptr<TrainingStep> step;
    ASSERT_TRUE(prepared_step(*backend, net, options, bert_batch(c, 23), 29, &step).ok());
    OptimizerSettings settings;
    settings.learning_rate = kind == OptimizerKind::adamw ? 1e-3f : 2e-2f;
    settings.weight_decay = 0.01f;
    std::vector<double> losses;
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(step->run(true, settings).ok());
      double loss = 0;
      ASSERT_TRUE(step->loss(&loss).ok());
      losses.push_back(loss);
    }
    EXPECT_NEAR(losses.front(), std::log(30522.0) + std::log(2.0), 0.5);
    EXPECT_LT(losses.back(), losses.front() - 1.0)
        << optimizer_name(kind) << ": " << losses.front() << " -> " << losses.back();
    // Two fp32 moments per parameter (and LAMB's per-tensor offsets).
    const double per_parameter = static_cast<double>(step->optimizer_state_bytes()) /
                                 static_cast<double>(net.parameter_count());
    EXPECT_NEAR(per_parameter, 8.0, 0.01);
  }
}

// cuda runs where a GPU is usable (skipped elsewhere).
INSTANTIATE_TEST_SUITE_P(Backends, BertStepTest,
                         testing::Values("cpu-onednn", "cpu-openblas", "cuda"));

// One step from the same weights and batch on cpu-openblas, and on cuda where a GPU is usable,
// agrees with cpu-onednn.
TEST(BertBackendAgreement, BackendsAgreeWithOnednn) {
  auto onednn = make_backend("cpu-onednn");
  if (!onednn) GTEST_SKIP() << "cpu-onednn is not in this build";
  const BertConfig c = bert_config("tiny", 2, 32);
  const Network net = build_bert(c);
  const std::vector<NamedTensor> batch = bert_batch(c, 31, true);
  auto step_on = [&](Backend& backend, double* loss, std::vector<NamedTensor>* grads) {
    std::unique_ptr<TrainingStep> step;
    ASSERT_TRUE(prepared_step(backend, net, {}, batch, 37, &step).ok());
    ASSERT_TRUE(step->run(false, {}).ok());
    ASSERT_TRUE(step->loss(loss).ok());
    ASSERT_TRUE(step->gradients(grads).ok());
  };
  double want_loss = 0;
  std::vector<NamedTensor> want;
  step_on(*onednn, &want_loss, &want);
  int compared = 0;
  for (const char* name : {"cpu-openblas", "cuda"}) {
    auto backend = make_backend(name);
    if (!backend) continue;
    double loss = 0;
    std::vector<NamedTensor> grads;
    step_on(*backend, &loss, &grads);
    EXPECT_NEAR(loss, want_loss, 1e-5 * want_loss) << name;
    const GradientError worst = worst_gradient_error(grads, want);
    EXPECT_LT(worst.error, 1e-4) << name << ": " << worst.parameter;
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "no second backend usable here";
}

// A malformed batch is refused with a reason, before any step runs.
TEST(BertBatch, MalformedBatchesAreRefused) {
  auto backend = make_cpu_backend();
  if (!backend) GTEST_SKIP() << "no CPU backend in this build";
  const BertConfig c = micro();
  std::unique_ptr<TrainingStep> step;
  ASSERT_TRUE(TrainingStep::create(*backend, build_bert(c), {}, &step).ok());
  std::vector<NamedTensor> batch = bert_batch(c, 1);
  ASSERT_TRUE(step->set_batch(batch).ok());
  std::vector<NamedTensor> bad = batch;
  bad[0].values[3] = static_cast<double>(c.vocab);  // token id out of the vocabulary
  Status status = step->set_batch(bad);
  EXPECT_EQ(status.code(), StatusCode::invalid_argument);
  EXPECT_NE(status.message().find("input_ids"), std::string::npos) << status.message();
  bad = batch;
  bad.pop_back();
  status = step->set_batch(bad);
  EXPECT_NE(status.message().find("next_sentence_labels"), std::string::npos) << status.message();
  bad = batch;
  bad[3].values.pop_back();
  EXPECT_FALSE(step->set_batch(bad).ok());
}

// Fused attention (one op per layer) computes what the unfused layers compute: in f64, from
// the same weights and batch (padded; lengths instead of the mask), the same loss and gradients.
// Dropout off: the fused op has none on the probabilities.
TEST(BertFusedAttention, ReferenceMatchesTheUnfusedLayers) {
  auto backend = make_cpu_backend();
  if (!backend) GTEST_SKIP() << "no CPU backend in this build";
  BertConfig c = micro();
  c.dropout = 0;
  auto step_of = [&](bool fused, double* loss, std::vector<NamedTensor>* grads) {
    c.fused_attention = fused;
    std::unique_ptr<TrainingStep> step;
    ASSERT_TRUE(prepared_step(*backend, build_bert(c), {DType::f64, Layout::plain},
                              bert_batch(c, 41, true), 43, &step)
                    .ok());
    ASSERT_TRUE(step->run(false, {}).ok());
    ASSERT_TRUE(step->loss(loss).ok());
    ASSERT_TRUE(step->gradients(grads).ok());
  };
  double unfused_loss = 0, fused_loss = 0;
  std::vector<NamedTensor> unfused, fused;
  step_of(false, &unfused_loss, &unfused);
  step_of(true, &fused_loss, &fused);
  ASSERT_EQ(unfused.size(), fused.size());
  EXPECT_NEAR(fused_loss, unfused_loss, 1e-12 * unfused_loss);
  const GradientError worst = worst_gradient_error(fused, unfused);
  EXPECT_LT(worst.error, 1e-10) << worst.parameter;
}

// The fused op's own backward against central differences of the loss (hidden dropout on).
TEST(BertFusedAttention, GradientsMatchFiniteDifferences) {
  auto backend = make_cpu_backend();
  if (!backend) GTEST_SKIP() << "no CPU backend in this build";
  BertConfig c = micro();
  c.fused_attention = true;
  testing_support::FiniteDifferences probe(*backend, build_bert(c), bert_batch(c, 47, true), 53);
  int checked = 0;
  for (const NamedTensor& grad : probe.gradients()) {
    if (grad.name.find(".attention.self.") == std::string::npos) continue;
    for (std::size_t k = 0; k < 3; ++k) {
      const std::size_t index = mix64(checked++) % grad.values.size();
      const double numeric = probe.derivative(grad.name, index, 1e-5);
      EXPECT_NEAR(grad.values[index], numeric, 1e-7 + 1e-5 * std::fabs(numeric))
          << grad.name << "[" << index << "]";
    }
  }
  EXPECT_EQ(checked, 18);  // query, key and value weights and biases, 3 entries each
}

// A key length masks the keys after it: moving a key past the length cannot change the output,
// and its gradients are zero.
TEST(BertFusedAttention, KeysAfterTheLengthAreMasked) {
  auto reference = cpu::make_host_reference_backend();
  AttentionOp op;
  op.batch = 2, op.heads = 2, op.sequence = 5, op.head_dim = 3, op.scale = 0.5f;
  op.dtype = DType::f64;
  const std::size_t count = static_cast<std::size_t>(op.batch * op.sequence * op.heads * 3);
  const std::vector<double> q = testing_support::random(count, 1),
                            k = testing_support::random(count, 2),
                            v = testing_support::random(count, 3), lengths = {3, 5};
  const auto before = testing_support::run_op(*reference, op, {q, k, v, lengths});
  std::vector<double> k_moved = k, v_moved = v;
  for (std::size_t d = 0; d < 6; ++d) {  // sequence 0, position 4 (past its length 3)
    k_moved[4 * 6 + d] += 10.0;
    v_moved[4 * 6 + d] -= 10.0;
  }
  const auto after = testing_support::run_op(*reference, op, {q, k_moved, v_moved, lengths});
  ASSERT_EQ(before.size(), 6u);
  EXPECT_EQ(before[4], after[4]);  // out
  EXPECT_EQ(before[5], after[5]);  // stats
  op.pass = Pass::backward;
  const auto grads = testing_support::run_op(
      *reference, op, {q, k, v, lengths, before[4], before[5], testing_support::random(count, 4)});
  ASSERT_EQ(grads.size(), 10u);
  for (std::size_t d = 0; d < 6; ++d) {
    EXPECT_EQ(grads[8][4 * 6 + d], 0.0);  // diff_k
    EXPECT_EQ(grads[9][4 * 6 + d], 0.0);  // diff_v
  }
  EXPECT_NE(grads[8][(5 + 4) * 6], 0.0);  // sequence 1, position 4: inside its length 5
}

// A sequence length is at least 1 (a row with no keys has no softmax): 0 is refused.
TEST(BertFusedAttention, EmptySequencesAreRefused) {
  auto backend = make_cpu_backend();
  if (!backend) GTEST_SKIP() << "no CPU backend in this build";
  BertConfig c = micro();
  c.fused_attention = true;
  std::unique_ptr<TrainingStep> step;
  ASSERT_TRUE(
      TrainingStep::create(*backend, build_bert(c), {DType::f64, Layout::plain}, &step).ok());
  std::vector<NamedTensor> batch = bert_batch(c, 1, true);
  ASSERT_TRUE(step->set_batch(batch).ok());
  for (NamedTensor& tensor : batch)
    if (tensor.name == "attention_lengths") tensor.values[0] = 0;
  const Status status = step->set_batch(batch);
  EXPECT_EQ(status.code(), StatusCode::invalid_argument);
  EXPECT_NE(status.message().find("[1, 9)"), std::string::npos) << status.message();
  for (const NamedTensor& tensor : seeded_batch(build_bert(c), 5)) {  // generic batches too
    if (tensor.name != "attention_lengths") continue;
    for (double length : tensor.values) EXPECT_GE(length, 1.0);
  }
}

// No CPU library here has a fused attention: the step is refused with the reason.
TEST(BertFusedAttention, CpuBackendsRefuseWithTheReason) {
  BertConfig c = micro();
  c.fused_attention = true;
  for (const char* name : {"cpu-onednn", "cpu-openblas"}) {
    auto backend = make_backend(name);
    if (!backend) continue;
    std::unique_ptr<TrainingStep> step;
    const Status status = TrainingStep::create(*backend, build_bert(c), {}, &step);
    EXPECT_EQ(status.code(), StatusCode::unimplemented) << name;
    EXPECT_NE(status.message().find("no fused attention"), std::string::npos) << status.message();
  }
}

// On a GPU: cuDNN's fused attention, in the tiny model's bf16 and f16 steps, against the f64
// op on the step's own inputs, op by op (skipped without a usable GPU).
TEST(BertFusedAttention, CudaStepMatchesTheReferenceOpByOp) {
  auto backend = make_backend("cuda");
  if (!backend) GTEST_SKIP() << "cuda is not in this build or not usable here";
  BertConfig c = bert_config("tiny", 2, 32);
  c.fused_attention = true;
  for (DType dtype : {DType::bf16, DType::f16}) {
    StepOptions options;
    options.dtype = dtype;
    std::unique_ptr<TrainingStep> step;
    const Status made =
        prepared_step(*backend, build_bert(c), options, bert_batch(c, 59, true), 61, &step);
    ASSERT_TRUE(made.ok()) << made.message();
    OpCheck check;
    ASSERT_TRUE(step->check_ops(&check).ok());
    EXPECT_TRUE(check.passed) << check.worst_output << ": " << check.worst_error;
    std::printf("%s: worst %.3g (allowed %g) at %s\n", std::string(dtype_name(dtype)).c_str(),
                check.worst_error, check.worst_tolerance, check.worst_output.c_str());
  }
}

TEST(BertTrainDescriptor, BadDescriptorsAreUsageErrors) {
  EXPECT_THROW(create_workload(Descriptor::parse("bert-train model=huge"), {}), UsageError);
  EXPECT_THROW(create_workload(Descriptor::parse("bert-train seq=1024"), {}), UsageError);
  EXPECT_THROW(create_workload(Descriptor::parse("bert-train dropout=1.5"), {}), UsageError);
  EXPECT_THROW(create_workload(Descriptor::parse("bert-train optimizer=sgd"), {}), UsageError);
  EXPECT_THROW(create_workload(Descriptor::parse("bert-train colour=red"), {}), UsageError);
  const auto workload =
      create_workload(Descriptor::parse("bert-train model=tiny optimizer=lamb"), {});
  EXPECT_EQ(workload->descriptor().to_string(),
            "bert-train model=tiny batch=8 seq=128 dtype=f32 optimizer=lamb dropout=0.1 lr=0.002");
  EXPECT_EQ(workload->counts().items, 8);
  EXPECT_EQ(workload->counts().tokens, 8 * 128);
  EXPECT_THROW(create_workload(Descriptor::parse("bert-train attention=flash"), {}), UsageError);
  // The fused variant is a separate case; its work is counted as the unfused layers'.
  const auto fused =
      create_workload(Descriptor::parse("bert-train model=tiny attention=fused"), {});
  EXPECT_EQ(fused->descriptor().to_string(),
            "bert-train model=tiny batch=8 seq=128 dtype=f32 optimizer=adamw dropout=0.1 lr=0.0001 "
            "attention=fused");
  const auto unfused = create_workload(Descriptor::parse("bert-train model=tiny"), {});
  EXPECT_EQ(fused->counts().flops, unfused->counts().flops);
}

}  // namespace
}  // namespace tb
