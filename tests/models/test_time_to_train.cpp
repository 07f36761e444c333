// Time-to-train: the dataset reader, ResNet-8, evaluation mode, the schedule, the MLPerf
// aggregate, and short runs of ttt-fashion-mnist on the real data.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "data/fashion_mnist.h"
#include "data/idx_file.h"
#include "models/reference_check.h"
#include "models/resnet.h"
#include "tests/models/support.h"
#include "tests/temp_dir.h"
#include "workloads/registry.h"
#include "workloads/time_to_train.h"

namespace tb {
namespace {

using testing_support::make_backend;

using testing_support::TempDir;

void write_gz(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(file);
}

TEST(IdxFile, ReadsAndRefusesMalformedFiles) {
  TempDir dir("trainbench-idx");
  // 2 x 3 unsigned bytes.
  std::vector<std::uint8_t> good = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6};
  write_gz(dir.file("good.gz"), good);
  IdxArray array;
  ASSERT_TRUE(read_idx_file(dir.file("good.gz"), 2, &array).ok());
  EXPECT_EQ(array.dims, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(array.values, (std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_FALSE(read_idx_file(dir.file("good.gz"), 3, &array).ok());  // wrong rank
  std::vector<std::uint8_t> truncated(good.begin(), good.end() - 1);
  write_gz(dir.file("truncated.gz"), truncated);
  Status status = read_idx_file(dir.file("truncated.gz"), 2, &array);
  EXPECT_NE(status.message().find("truncated"), std::string::npos) << status.message();
  std::vector<std::uint8_t> longer = good;
  longer.push_back(7);
  write_gz(dir.file("long.gz"), longer);
  EXPECT_FALSE(read_idx_file(dir.file("long.gz"), 2, &array).ok());
  std::vector<std::uint8_t> floats = good;
  floats[2] = 0x0d;  // float data
  write_gz(dir.file("floats.gz"), floats);
  EXPECT_FALSE(read_idx_file(dir.file("floats.gz"), 2, &array).ok());
  // 2^28 x 2^28 x 2^28 promised: refused by the header, naming the file, before any allocation.
  write_gz(dir.file("huge.gz"), {0, 0, 8, 3, 16, 0, 0, 0, 16, 0, 0, 0, 16, 0, 0, 0, 1});
  status = read_idx_file(dir.file("huge.gz"), 3, &array);
  EXPECT_NE(status.message().find("huge.gz: the header declares more than"), std::string::npos)
      << status.message();
  status = read_idx_file(dir.file("absent.gz"), 2, &array);
  EXPECT_NE(status.message().find("absent.gz"), std::string::npos);
  FashionMnist data;
  status = load_fashion_mnist(dir.file("nowhere"), &data);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("dataset-fashion-mnist"), std::string::npos) << status.message();
}

// The real files (scripts/setup.sh installs Debian's dataset-fashion-mnist).
TEST(FashionMnist, LoadsTheDebianPackage) {
  FashionMnist data;
  const Status status = load_fashion_mnist(fashion_mnist_directory(), &data);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(data.train.count, 60000);
  EXPECT_EQ(data.test.count, 10000);
  std::vector<int> per_class(10, 0);
  for (std::int32_t label : data.test.labels) ++per_class[label];
  EXPECT_EQ(per_class, std::vector<int>(10, 1000));  // balanced classes
  const double mean = std::accumulate(data.train.pixels.begin(), data.train.pixels.end(), 0.0) /
                      static_cast<double>(data.train.pixels.size());
  EXPECT_NEAR(mean, 0.0, 0.01);  // normalized with the training set's mean
}

TEST(ResNet8, ParametersAndNamesMatchTorchvisionsBasicBlocks) {
  const Network net = build_resnet(resnet8_fashion_mnist(4));
  EXPECT_EQ(net.parameter_count(), 308'074);
  std::map<std::string, std::vector<std::int64_t>> dims;
  for (const Parameter& p : net.parameters()) dims[p.name] = p.dims;
  EXPECT_EQ(dims.at("conv1.weight"), (std::vector<std::int64_t>{32, 1, 3, 3}));
  EXPECT_EQ(dims.at("layer2.0.conv1.weight"), (std::vector<std::int64_t>{64, 32, 3, 3}));
  EXPECT_EQ(dims.at("layer3.0.downsample.0.weight"), (std::vector<std::int64_t>{128, 64, 1, 1}));
  EXPECT_EQ(dims.at("fc.weight"), (std::vector<std::int64_t>{10, 128}));
  EXPECT_EQ(dims.count("layer1.0.downsample.0.weight"), 0u);  // same width, stride 1
  ResNetConfig too_small = resnet8_fashion_mnist(1);
  too_small.image = 3;
  EXPECT_THROW(build_resnet(too_small), UsageError);
}

// Every op of an evaluation step (batch norm on running statistics) and of a training step
// against f64.
TEST(EvaluationStep, EveryOpMatchesTheReference) {
  auto backend = make_backend("cpu-onednn");
  if (!backend) GTEST_SKIP() << "cpu-onednn is not in this build";
  const Network net = build_resnet(resnet8_fashion_mnist(8));
  StepOptions evaluation;
  evaluation.evaluation = true;
  testing_support::expect_ops_match_reference(*backend, net, evaluation, seeded_batch(net, 3), 20);
  testing_support::expect_ops_match_reference(*backend, net, {}, seeded_batch(net, 3), 80);
}

// Evaluation uses the running statistics: after training steps moved them, its logits
// differ from a training-mode forward of the same batch, and they match the f64 evaluation.
TEST(EvaluationStep, UsesRunningStatisticsAndRefusesUpdates) {
  auto backend = make_backend("cpu-onednn");
  if (!backend) GTEST_SKIP() << "cpu-onednn is not in this build";
  const Network net = build_resnet(resnet8_fashion_mnist(8));
  const std::vector<NamedTensor> batch = seeded_batch(net, 5);
  std::unique_ptr<TrainingStep> train, eval, reference;
  ASSERT_TRUE(prepared_step(*backend, net, {}, batch, 7, &train).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(train->run(true, {0.05f, 0.9f, 0.0f}).ok());
  ASSERT_TRUE(train->run(false, {}).ok());
  StepOptions options;
  options.evaluation = true;
  ASSERT_TRUE(prepared_step(*backend, net, options, batch, 7, &eval).ok());
  options.dtype = DType::f64, options.layout = Layout::plain;
  ASSERT_TRUE(prepared_step(*backend, net, options, batch, 7, &reference).ok());
  std::vector<NamedTensor> state;
  ASSERT_TRUE(train->state(&state).ok());
  ASSERT_TRUE(eval->load_state(state).ok());
  ASSERT_TRUE(reference->load_state(state).ok());
  std::vector<double> training_logits, eval_logits, reference_logits;
  ASSERT_TRUE(train->layer_output("fc", &training_logits).ok());
  for (TrainingStep* step : {eval.get(), reference.get()}) ASSERT_TRUE(step->run(false, {}).ok());
  ASSERT_TRUE(eval->layer_output("fc", &eval_logits).ok());
  ASSERT_TRUE(reference->layer_output("fc", &reference_logits).ok());
  EXPECT_LT(relative_l2_error(eval_logits, reference_logits), 1e-5);
  EXPECT_GT(relative_l2_error(eval_logits, training_logits), 1e-3);
  EXPECT_EQ(eval->run(true, {}).code(), StatusCode::invalid_argument);
  EXPECT_FALSE(eval->layer_output("no-such-layer", &eval_logits).ok());
  // The argmax the evaluations read equals the argmax of the widened logits.
  std::vector<std::int32_t> predicted;
  ASSERT_TRUE(eval->layer_argmax("fc", 10, &predicted).ok());
  ASSERT_EQ(predicted.size() * 10, eval_logits.size());
  for (std::size_t r = 0; r < predicted.size(); ++r) {
    const auto row = eval_logits.begin() + static_cast<std::ptrdiff_t>(r * 10);
    EXPECT_EQ(predicted[r], std::max_element(row, row + 10) - row) << r;
  }
  EXPECT_EQ(eval->layer_argmax("fc", 7, &predicted).code(), StatusCode::invalid_argument);
}

TEST(OneCycle, FollowsPyTorchsOneCycleLR) {
  const OneCycle schedule{0.1, 1000};
  EXPECT_NEAR(schedule.learning_rate(0), 0.1 / 25, 1e-12);
  EXPECT_NEAR(schedule.learning_rate(299), 0.1, 1e-12);  // the peak at 30%
  EXPECT_NEAR(schedule.learning_rate(999), 0.1 / 25 / 1e4, 1e-15);
  EXPECT_NEAR(schedule.momentum(0), 0.95, 1e-12);
  EXPECT_NEAR(schedule.momentum(299), 0.85, 1e-12);
  EXPECT_NEAR(schedule.momentum(999), 0.95, 1e-12);
  // Values PyTorch 1.13's OneCycleLR(max_lr=0.1, total_steps=1000) gives.
  EXPECT_NEAR(schedule.learning_rate(149), 0.051747833187745305, 1e-12);
  EXPECT_NEAR(schedule.momentum(149), 0.9002626737627653, 1e-12);
  EXPECT_NEAR(schedule.learning_rate(300), 0.09999949645161448, 1e-12);
  for (std::int64_t step = 1; step < 1000; ++step)
    if (step <= 299) {
      EXPECT_GE(schedule.learning_rate(step), schedule.learning_rate(step - 1));
    } else {
      EXPECT_LE(schedule.learning_rate(step), schedule.learning_rate(step - 1));
    }
}

// MLPerf counts a run that missed the target as infinitely slow: one miss among 3 or more runs
// is the slowest and dropped, a second one makes the aggregate infinite (the case fails).
TEST(MlperfAggregate, MissedRunsCountAsInfinitelySlow) {
  std::vector<TrainingRun> runs(6);
  const double times[] = {10, 20, 30, 40, 50, 0};
  for (int i = 0; i < 6; ++i) {
    runs[i].converged = i < 5;
    runs[i].time_to_train_s = times[i];
  }
  EXPECT_DOUBLE_EQ(*mlperf_aggregate(runs), 35.0);  // 10 and the miss dropped: (20+30+40+50) / 4
  runs[4].converged = false;                        // a second miss
  EXPECT_FALSE(mlperf_aggregate(runs).has_value());
  runs.resize(5);
  runs[4].converged = true;
  EXPECT_DOUBLE_EQ(*mlperf_aggregate(runs), 30.0);  // all converged: (20 + 30 + 40) / 3
  runs.resize(2);
  EXPECT_DOUBLE_EQ(*mlperf_aggregate(runs), 15.0);  // fewer than 3: nothing dropped
  runs[1].converged = false;  // with fewer than 3 runs nothing is dropped, so one miss is infinite
  EXPECT_FALSE(mlperf_aggregate(runs).has_value());
  for (TrainingRun& run : runs) run.converged = false;
  EXPECT_FALSE(mlperf_aggregate(runs).has_value());
}

// A short run on a subset: the curve, the time and the run's record; a target out of reach is
// reported as not converged, not as a time.
TEST(TttFashionMnist, ShortRunsConvergeOrSayTheyDidNot) {
  auto backend = make_backend("cpu-onednn");
  if (!backend) GTEST_SKIP() << "cpu-onednn is not in this build";
  auto workload =
      create_workload(Descriptor::parse("ttt-fashion-mnist target=0.5 subset=6400 epochs=1"), {});
  ASSERT_TRUE(workload->times_itself());
  ASSERT_TRUE(workload->setup(*backend, 42).ok());
  const Validation validation = workload->validate();
  ASSERT_TRUE(validation.passed) << validation.message;
  const Status ran = workload->run();
  ASSERT_TRUE(ran.ok()) << ran.message();
  ASSERT_EQ(workload->own_samples().size(), 1u);
  const nlohmann::json details = workload->details();
  const nlohmann::json& run = details["runs"][0];
  EXPECT_TRUE(run["converged"].get<bool>());
  EXPECT_GT(run["curve"].size(), 0u);
  const nlohmann::json& last = run["curve"].back();
  EXPECT_GE(last["quality"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(run["time_to_train_s"].get<double>(), last["time_s"].get<double>());
  EXPECT_DOUBLE_EQ(workload->own_samples()[0], last["time_s"].get<double>());
  EXPECT_GT(run["data_load_s"].get<double>(), 0.0);
  EXPECT_EQ(details["parameters"], 308'074);

  auto unreachable =
      create_workload(Descriptor::parse("ttt-fashion-mnist target=0.99 subset=1280 epochs=1"), {});
  ASSERT_TRUE(unreachable->setup(*backend, 42).ok());
  const Status failed = unreachable->run();
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("1 of 1 runs missed"), std::string::npos) << failed.message();
  EXPECT_EQ(failed.reason_code(), ReasonCode::target_missed);  // no library failed
  EXPECT_TRUE(unreachable->own_samples().empty());
  EXPECT_FALSE(unreachable->details()["runs"][0]["converged"].get<bool>());
  EXPECT_EQ(unreachable->details()["runs_missed"], 1);
}

TEST(TttFashionMnist, DescriptorsAreChecked) {
  EXPECT_THROW(create_workload(Descriptor::parse("ttt-fashion-mnist target=1.5"), {}), UsageError);
  EXPECT_THROW(create_workload(Descriptor::parse("ttt-fashion-mnist colour=red"), {}), UsageError);
  EXPECT_EQ(create_workload(Descriptor::parse("ttt-fashion-mnist"), {})->descriptor().to_string(),
            "ttt-fashion-mnist target=0.9 batch=128 dtype=f32 epochs=3 lr=0.1 runs=1");
}

// A short run of the masked-LM on real text: it must learn beyond the unigram plateau (always
// guessing the most frequent word, about 6.4% of the held-out masked words), so the target is
// above it; an unreachable target is reported as not converged.
TEST(TttMlm, ShortRunLearnsBeyondTheMostFrequentWord) {
  auto backend = make_backend("cpu-onednn");
  if (!backend) GTEST_SKIP() << "cpu-onednn is not in this build";
  auto workload = create_workload(
      Descriptor::parse("ttt-mlm target=0.09 vocab=4096 subset=8192 epochs=1 lr=0.001 warmup=0.06"),
      {});
  ASSERT_TRUE(workload->setup(*backend, 42).ok());
  const Validation validation = workload->validate();
  ASSERT_TRUE(validation.passed) << validation.message;
  const Status ran = workload->run();
  const nlohmann::json details = workload->details();
  ASSERT_TRUE(ran.ok()) << ran.message() << "\n" << details["runs"].dump();
  const nlohmann::json& run = details["runs"][0];
  EXPECT_TRUE(run["converged"].get<bool>());
  EXPECT_GE(run["curve"].back()["quality"].get<double>(), 0.09);
  EXPECT_EQ(details["dataset"]["heldout_glosses"], 5883);
  EXPECT_EQ(details["dataset"]["train_sequences"], 8192);
  EXPECT_GT(details["dataset"]["heldout_sequences"].get<int>(), 1000);
  // 2 layers of hidden 128 (4 x 128^2 + 4 x 128 attention, 2 x 128 x 512 + 512 + 128
  // feed-forward, two layer norms), embeddings, the masked-LM transform and decoder bias.
  const std::int64_t h = 128, f = 512, v = 4096, s = 64;
  const std::int64_t layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 4 * h;
  EXPECT_EQ(details["parameters"].get<std::int64_t>(),
            (v + s + 2) * h + 2 * h + 2 * layer + (h * h + h) + 2 * h + v);

  auto unreachable = create_workload(
      Descriptor::parse("ttt-mlm target=0.9 layers=1 hidden=64 vocab=1024 subset=256 epochs=1"),
      {});
  ASSERT_TRUE(unreachable->setup(*backend, 42).ok());
  const Status failed = unreachable->run();
  EXPECT_NE(failed.message().find("held-out masked-LM accuracy"), std::string::npos)
      << failed.message();
  EXPECT_FALSE(unreachable->details()["runs"][0]["converged"].get<bool>());
}

TEST(TttMlm, DescriptorsAreChecked) {
  EXPECT_EQ(create_workload(Descriptor::parse("ttt-mlm"), {})->descriptor().to_string(),
            "ttt-mlm target=0.175 batch=32 dtype=f32 epochs=4 lr=0.002 runs=1 seq=64 vocab=8192 "
            "layers=2 hidden=128 dropout=0 warmup=0.2");
  for (const char* bad :
       {"ttt-mlm target=0", "ttt-mlm hidden=100", "ttt-mlm vocab=60000", "ttt-mlm seq=8",
        "ttt-mlm dtype=f16", "ttt-mlm optimizer=sgd", "ttt-mlm warmup=1", "ttt-mlm dropout=-0.1"})
    EXPECT_THROW(create_workload(Descriptor::parse(bad), {}), UsageError) << bad;
}

TEST(LinearWarmupDecay, RisesToThePeakThenFallsToZero) {
  const LinearWarmupDecay schedule{1e-3, 4, 12};
  EXPECT_DOUBLE_EQ(schedule.learning_rate(0), 0.25e-3);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(3), 1e-3);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(4), 1e-3);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(8), 0.5e-3);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(12), 0.0);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(20), 0.0);
}

}  // namespace
}  // namespace tb
