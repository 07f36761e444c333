// Gradient buckets (models/gradient_buckets.h): DDP's assignment on made-up parameters, and the
// buckets of real steps (ResNet-8, BERT-tiny) covering the flat gradient buffer in the order
// backward completes it; the data-parallel loss-gradient scale. The exchange across ranks is
// tested under mpirun (tests/dist/test_data_parallel.cpp).
#include <gtest/gtest.h>

#include <algorithm>

#include "models/bert.h"
#include "models/gradient_buckets.h"
#include "models/reference_check.h"
#include "models/resnet.h"
#include "tests/models/support.h"

namespace tb {
namespace {

using testing_support::make_cpu_backend;

TEST(GradientBuckets, FillInReverseBufferOrderUpToTheCap) {
  // Four parameters of 100, 300, 50 and 600 floats (their padding included), completed by
  // backward ops 9, 6, 4 and 1: the reverse of the buffer order, as a network built in
  // forward order produces them.
  const std::vector<ParameterGradient> params = {
      {0, 100, 9}, {100, 300, 6}, {400, 50, 4}, {450, 600, 1}};
  const std::vector<GradientBucket> buckets = plan_gradient_buckets(params, 4, 1200);
  // The last parameter alone reaches 2400 bytes: a bucket of its own; the next two reach 1400;
  // the first is what is left.
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].offset, 450);
  EXPECT_EQ(buckets[0].count, 600);
  EXPECT_EQ(buckets[0].ready_after, 1);
  EXPECT_EQ(buckets[1].offset, 100);
  EXPECT_EQ(buckets[1].count, 350);
  EXPECT_EQ(buckets[1].ready_after, 6);  // waits for its last gradient
  EXPECT_EQ(buckets[1].parameters, 2);
  EXPECT_EQ(buckets[2].offset, 0);
  EXPECT_EQ(buckets[2].count, 100);
  // One huge cap: one bucket over the whole buffer, ready after the last op.
  const std::vector<GradientBucket> one = plan_gradient_buckets(params, 4, std::size_t{1} << 30);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].offset, 0);
  EXPECT_EQ(one[0].count, 1050);
  EXPECT_EQ(one[0].ready_after, 9);
}

TEST(GradientBuckets, StartInTheOrderBackwardCompletesThem) {
  // The first parameter is completed first (a tied weight completes last in the buffer's
  // middle, and so on): buckets are started by the op that completes them, not by offset.
  const std::vector<ParameterGradient> params = {{0, 100, 2}, {100, 100, 8}, {200, 100, 5}};
  const std::vector<GradientBucket> buckets = plan_gradient_buckets(params, 4, 400);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].offset, 0);
  EXPECT_EQ(buckets[1].offset, 200);
  EXPECT_EQ(buckets[2].offset, 100);
}

// The step's buckets tile its flat gradient buffer, each ready after the op that writes the
// last of its gradients, started in a non-decreasing op order, the first well before backward
// ends (so overlap is possible).
void expect_buckets_cover_the_buffer(const Network& net, std::size_t bucket_bytes,
                                     std::size_t min_buckets) {
  const std::unique_ptr<Backend> backend = make_cpu_backend();
  if (!backend) GTEST_SKIP() << "no CPU backend in this build";
  std::unique_ptr<TrainingStep> step;
  ASSERT_TRUE(TrainingStep::create(*backend, net, {}, &step).ok());
  std::vector<GradientBucket> buckets = step->gradient_buckets(bucket_bytes);
  ASSERT_GE(buckets.size(), min_buckets);
  int parameters = 0;
  for (std::size_t b = 1; b < buckets.size(); ++b)
    EXPECT_LE(buckets[b - 1].ready_after, buckets[b].ready_after);
  EXPECT_LT(buckets.front().ready_after, buckets.back().ready_after);
  std::sort(buckets.begin(), buckets.end(),
            [](const GradientBucket& a, const GradientBucket& b) { return a.offset < b.offset; });
  std::int64_t end = 0;
  for (const GradientBucket& bucket : buckets) {
    EXPECT_EQ(bucket.offset, end);
    end = bucket.offset + bucket.count;
    parameters += bucket.parameters;
    EXPECT_GE(bucket.ready_after, 0);
  }
  EXPECT_EQ(parameters, static_cast<int>(net.parameters().size()));
  EXPECT_GE(end, net.parameter_count());
  EXPECT_LT(end, net.parameter_count() + 16 * static_cast<std::int64_t>(parameters));
}

TEST(GradientBuckets, CoverAResNetStepsGradients) {
  expect_buckets_cover_the_buffer(build_resnet(resnet8_fashion_mnist(2)), 64 << 10, 6);
}

TEST(GradientBuckets, CoverABertStepsGradientsTheTiedEmbeddingLast) {
  const Network net = build_bert(bert_config("tiny", 2, 32));
  expect_buckets_cover_the_buffer(net, 64 << 10, 6);
  const std::unique_ptr<Backend> backend = make_cpu_backend();
  if (!backend) GTEST_SKIP() << "no CPU backend in this build";
  std::unique_ptr<TrainingStep> step;
  ASSERT_TRUE(TrainingStep::create(*backend, net, {}, &step).ok());
  // The word embeddings (the first parameter, tied to the decoder) are final only after the
  // embedding layer's backward, the last of every op writing a gradient: their bucket is last.
  const std::vector<GradientBucket> buckets = step->gradient_buckets(64 << 10);
  EXPECT_EQ(buckets.back().offset, 0);
}

// A step averaging over two ranks divides its loss gradient by 2: with no exchange, every
// gradient is exactly half a single process's (a power of two passes every linear op exactly).
TEST(GradientBuckets, DataParallelStepsHalveTheLossGradientExactly) {
  const std::unique_ptr<Backend> backend = make_cpu_backend();
  if (!backend) GTEST_SKIP() << "no CPU backend in this build";
  const Network net = build_resnet(resnet8_fashion_mnist(2));
  const std::vector<NamedTensor> batch = seeded_batch(net, 3);
  std::vector<NamedTensor> alone, halved;
  for (int ranks : {1, 2}) {
    StepOptions options;
    options.data_parallel_ranks = ranks;
    std::unique_ptr<TrainingStep> step;
    ASSERT_TRUE(prepared_step(*backend, net, options, batch, 5, &step).ok());
    ASSERT_TRUE(step->run(false, {}).ok());
    ASSERT_TRUE(step->gradients(ranks == 1 ? &alone : &halved).ok());
  }
  ASSERT_EQ(alone.size(), halved.size());
  for (std::size_t p = 0; p < alone.size(); ++p)
    for (std::size_t i = 0; i < alone[p].values.size(); ++i)
      ASSERT_EQ(halved[p].values[i], 0.5 * alone[p].values[i]) << alone[p].name << " " << i;
  StepOptions bad;
  bad.data_parallel_ranks = 0;
  std::unique_ptr<TrainingStep> step;
  EXPECT_EQ(TrainingStep::create(*backend, net, bad, &step).code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace tb
