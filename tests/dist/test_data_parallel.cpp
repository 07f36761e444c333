// Data-parallel training steps across the World's ranks (2 under mpiexec, 1 on its own): after
// a step every rank's weights are bitwise equal, and the averaged gradients equal one process's
// on the same global batch (BERT-tiny at dropout 0: the global-batch step itself; ResNet-8,
// whose batch norm is per rank: one process stepping on each rank's slice separately). A
// damaged weight and a damaged gradient fail those checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "models/bert.h"
#include "models/data_parallel.h"
#include "models/reference_check.h"
#include "models/resnet.h"
#include "tests/dist/world_fixture.h"
#include "tests/models/support.h"
#include "workloads/registry.h"

namespace tb {
namespace {

// Tight enough that a gradient off by a part in 10^4 fails: the ranks' partial sums and the
// all-reduce change the order of float additions, which moves these gradients by about 1e-7.
constexpr double kGradientTolerance = 1e-5;
// Buckets of 64 KB: a few dozen for these networks, so several are reduced during backward.
constexpr std::size_t kBucketBytes = 64 << 10;
constexpr std::uint64_t kWeightSeed = 11, kBatchSeed = 5;

struct DataParallelRun {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Communicator> communicator;
  std::unique_ptr<TrainingStep> step;
  std::vector<NamedTensor> gradients;  // after the exchange: the mean over the ranks
};

// One data-parallel step of `local` (the per-rank network) on this rank's slice of `batch`
// (a batch of `global`), gradients exchanged in buckets while backward runs.
void step_data_parallel(const Network& global, const Network& local,
                        const std::vector<NamedTensor>& batch, StepOptions options,
                        DataParallelRun* run) {
  World& world = test::world();
  run->backend = testing_support::make_cpu_backend();
  if (!run->backend) GTEST_SKIP() << "no CPU backend in this build";
  ASSERT_TRUE(run->backend->make_communicator(world, &run->communicator).ok());
  std::vector<NamedTensor> slice;
  ASSERT_TRUE(batch_slice(global, batch, world.rank(), world.size(), &slice).ok());
  options.data_parallel_ranks = world.size();
  options.dropout_seed = rank_dropout_seed(options.dropout_seed, world.rank());
  ASSERT_TRUE(prepared_step(*run->backend, local, options, slice, kWeightSeed, &run->step).ok());
  ASSERT_TRUE(run->step->exchange_gradients(run->communicator.get(), {kBucketBytes, true}).ok());
  ASSERT_GE(run->step->gradient_exchange()->buckets().size(), 4u);
  OptimizerSettings sgd;
  sgd.learning_rate = 0.05f;
  const Status ran = run->step->run(/*update=*/true, sgd);
  ASSERT_TRUE(ran.ok()) << ran.message();
  ASSERT_TRUE(run->step->gradients(&run->gradients).ok());
}

void expect_weights_bitwise_equal(TrainingStep& step) {
  std::string different;
  ASSERT_TRUE(compare_weights_across_ranks(test::world(), step, &different).ok());
  EXPECT_EQ(different, "") << "weights differ between ranks";
}

// A weight changed by one bit on the last rank is found on every rank (at one rank there is
// nothing to differ from).
void expect_a_damaged_weight_found(TrainingStep& step) {
  World& world = test::world();
  if (world.size() == 1) return;
  std::vector<NamedTensor> state, grads;
  ASSERT_TRUE(step.state(&state).ok());
  ASSERT_TRUE(step.gradients(&grads).ok());
  const std::string& parameter = grads[grads.size() / 2].name;  // not a running statistic
  const auto found = std::find_if(state.begin(), state.end(),
                                  [&](const NamedTensor& t) { return t.name == parameter; });
  ASSERT_NE(found, state.end());
  NamedTensor& damaged = *found;
  if (world.rank() == world.size() - 1) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &damaged.values[0], sizeof(bits));
    bits ^= std::uint64_t{1} << 40;  // within a float's mantissa
    std::memcpy(&damaged.values[0], &bits, sizeof(bits));
  }
  ASSERT_TRUE(step.load_state(state).ok());
  std::string different;
  ASSERT_TRUE(compare_weights_across_ranks(world, step, &different).ok());
  EXPECT_EQ(different, damaged.name);
}

void expect_gradients_match(const std::vector<NamedTensor>& got,
                            const std::vector<NamedTensor>& want) {
  const GradientError error = worst_gradient_error(got, want);
  EXPECT_LE(error.error, kGradientTolerance) << error.parameter;
  std::printf("rank %d: worst gradient %.3g at %s\n", test::world().rank(), error.error,
              error.parameter.c_str());
  // A gradient a part in 10^4 off (one parameter's) fails.
  std::vector<NamedTensor> damaged = got;
  for (double& value : damaged[damaged.size() / 3].values) value *= 1 + 1e-4;
  EXPECT_GT(worst_gradient_error(damaged, want).error, kGradientTolerance);
}

TEST(DataParallel, BertStepsAgreeAcrossRanksAndWithTheGlobalBatchStep) {
  const int ranks = test::world().size();
  BertConfig config = bert_config("tiny", 2 * ranks, 32);
  config.dropout = 0;  // masks are per rank: only without them is the global step the same
  const Network global = build_bert(config);
  const std::vector<NamedTensor> batch = bert_batch(config, kBatchSeed, /*padded=*/true);
  config.batch = 2;
  const Network local = build_bert(config);
  StepOptions options;
  options.optimizer = OptimizerKind::adamw;
  DataParallelRun run;
  ASSERT_NO_FATAL_FAILURE(step_data_parallel(global, local, batch, options, &run));
  if (!run.backend) return;
  expect_weights_bitwise_equal(*run.step);
  // One process on the whole global batch.
  std::unique_ptr<TrainingStep> whole;
  ASSERT_TRUE(prepared_step(*run.backend, global, options, batch, kWeightSeed, &whole).ok());
  ASSERT_TRUE(whole->run(/*update=*/false, {}).ok());
  std::vector<NamedTensor> want;
  ASSERT_TRUE(whole->gradients(&want).ok());
  expect_gradients_match(run.gradients, want);
  expect_a_damaged_weight_found(*run.step);
}

TEST(DataParallel, ResNetStepsAgreeAcrossRanksAndWithSeparateBatchNormGroups) {
  const int ranks = test::world().size();
  const Network global = build_resnet(resnet8_fashion_mnist(2 * ranks));
  const Network local = build_resnet(resnet8_fashion_mnist(2));
  const std::vector<NamedTensor> batch = seeded_batch(global, kBatchSeed);
  DataParallelRun run;
  ASSERT_NO_FATAL_FAILURE(step_data_parallel(global, local, batch, {}, &run));
  if (!run.backend) return;
  expect_weights_bitwise_equal(*run.step);
  // One process stepping on each rank's slice alone (per-rank batch norm), gradients averaged.
  std::vector<std::vector<NamedTensor>> slices(ranks);
  std::vector<std::uint64_t> seeds;
  for (int r = 0; r < ranks; ++r) {
    ASSERT_TRUE(batch_slice(global, batch, r, ranks, &slices[r]).ok());
    seeds.push_back(rank_dropout_seed(0, r));
  }
  std::vector<NamedTensor> want;
  ASSERT_TRUE(
      mean_gradients_of_slices(*run.backend, local, {}, slices, seeds, kWeightSeed, &want).ok());
  expect_gradients_match(run.gradients, want);
  expect_a_damaged_weight_found(*run.step);
}

TEST(DataParallel, ABatchThatCannotBeSplitIsRefused) {
  const Network global = build_resnet(resnet8_fashion_mnist(3));
  std::vector<NamedTensor> slice;
  const Status status = batch_slice(global, seeded_batch(global, 1), 0, 2, &slice);
  EXPECT_EQ(status.code(), StatusCode::invalid_argument);
  EXPECT_NE(status.message().find("cannot be split evenly across 2 ranks"), std::string::npos)
      << status.message();
}

// resnet50-train across the World's ranks: validated data parallel, its details giving the
// figures the report needs (a small ResNet so that it runs in seconds). Each rank's batch norms
// see 16 values per channel at layer4 (4 images of 2x2): with 2 values (batch=2 image=32) they
// amplify a step's update so much that the loss rose over the check's steps.
TEST(DataParallel, TrainingWorkloadValidatesAndReportsItsScaling) {
  World& world = test::world();
  const std::unique_ptr<Backend> backend = testing_support::make_cpu_backend();
  if (!backend) GTEST_SKIP() << "no CPU backend in this build";
  std::unique_ptr<Workload> workload = create_workload(
      Descriptor::parse("resnet50-train batch=4 image=64 width=8 classes=10 bucket_mb=1"), {});
  workload->join(world);
  ASSERT_TRUE(workload->setup(*backend, 7).ok());
  const Validation validation = workload->validate();
  ASSERT_TRUE(validation.passed) << validation.message;
  const Status breakdown = workload->time_breakdown();  // the data-parallel timings among it
  ASSERT_TRUE(breakdown.ok()) << breakdown.message();
  EXPECT_EQ(workload->counts().items, 4.0 * world.size());  // the global batch
  const nlohmann::json details = workload->details();
  if (world.size() == 1) {
    EXPECT_FALSE(details.contains("data_parallel"));
    return;
  }
  EXPECT_NE(validation.method.find("bitwise"), std::string::npos) << validation.method;
  const nlohmann::json& dp = details.at("data_parallel");
  EXPECT_EQ(dp.at("world_size"), world.size());
  EXPECT_EQ(dp.at("global_batch"), 4 * world.size());
  EXPECT_GT(dp.at("buckets").get<int>(), 1);
  for (const char* mode : {"overlap_on", "overlap_off"}) {
    EXPECT_GT(dp.at(mode).at("step_s").get<double>(), 0) << mode;
    EXPECT_GT(dp.at(mode).at("scaling_efficiency").get<double>(), 0) << mode;
  }
  EXPECT_GT(dp.at("communication_s").get<double>(), 0);
  if (world.rank() == 0) std::printf("%s\n", dp.dump(1).c_str());
}

// ttt-fashion-mnist across the World's ranks: an epoch is the global batch's steps, samples count
// every rank's, and with the global batch of the single-process test it reaches the same target.
TEST(DataParallel, TimeToTrainStepsTheGlobalBatch) {
  World& world = test::world();
  const std::unique_ptr<Backend> backend = testing_support::make_backend("cpu-onednn");
  if (!backend) GTEST_SKIP() << "cpu-onednn is not in this build";
  const std::int64_t batch = 128 / world.size();
  std::unique_ptr<Workload> workload =
      create_workload(Descriptor::parse(fmt::format(
                          "ttt-fashion-mnist target=0.5 subset=6400 epochs=1 batch={}", batch)),
                      {});
  workload->join(world);
  ASSERT_TRUE(workload->setup(*backend, 42).ok());
  const Status ran = workload->run();
  ASSERT_TRUE(ran.ok()) << ran.message();
  const nlohmann::json details = workload->details();
  const nlohmann::json& run = details.at("runs").at(0);
  EXPECT_TRUE(run.at("converged").get<bool>());
  EXPECT_EQ(run.at("samples").get<std::int64_t>(),
            run.at("steps").get<std::int64_t>() * batch * world.size());
  if (world.size() > 1) {
    EXPECT_EQ(details.at("data_parallel").at("global_batch"), 128);
  }
}

}  // namespace
}  // namespace tb
