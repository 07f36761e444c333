// ttt-fashion-mnist: time-to-train on real data. ResNet-8 (the ResNet code with basic blocks
// and a small stem) trained on Fashion-MNIST's 60,000 images with SGD + momentum and a
// one-cycle schedule until the full 10,000-image test set, evaluated every half epoch,
// reaches the target accuracy.
#include <algorithm>

#include <fmt/format.h>

#include "data/fashion_mnist.h"
#include "models/resnet.h"
#include "workloads/kind_registry.h"
#include "workloads/time_to_train.h"

namespace tb {
namespace {

const WorkloadKind& ttt_fashion_mnist_kind();  // the key table, with the factory below

struct FashionRecipe {
  std::int64_t subset = 0;  // train on the first N images only (0: all), for quick checks
  double weight_decay = 5e-4;
};

constexpr std::int64_t kEvalBatch = 1000, kCheckBatch = 8;
const TimeToTrainBudget kBudget{.target = 0.90, .batch = 128, .epochs = 3};

// Images `rows` of a split as a batch for the network's inputs.
std::vector<NamedTensor> batch_of(const LabelledImages& split, const std::int64_t* rows,
                                  std::int64_t count) {
  constexpr std::int64_t kPixels = kFashionMnistSide * kFashionMnistSide;
  NamedTensor images{"images", {count, 1, kFashionMnistSide, kFashionMnistSide}, {}, false};
  NamedTensor labels{"labels", {count}, {}, true};
  images.values.reserve(static_cast<std::size_t>(count * kPixels));
  for (std::int64_t k = 0; k < count; ++k) {
    const float* pixels = split.pixels.data() + rows[k] * kPixels;
    images.values.insert(images.values.end(), pixels, pixels + kPixels);
    labels.values.push_back(split.labels[static_cast<std::size_t>(rows[k])]);
  }
  return {std::move(images), std::move(labels)};
}

class TttFashionMnist final : public TimeToTrainWorkload {
 public:
  TttFashionMnist(const TimeToTrainBudget& budget, const FashionRecipe& recipe)
      : TimeToTrainWorkload(budget, build_resnet(resnet8_fashion_mnist(budget.batch)),
                            build_resnet(resnet8_fashion_mnist(kEvalBatch)), {budget.dtype}),
        recipe_(recipe) {}

  Descriptor descriptor() const override {
    auto values = budget_values();
    values["subset"] = std::to_string(recipe_.subset);
    return canonical_descriptor(ttt_fashion_mnist_kind(), values);
  }

 private:
  Network check_network() const override {
    return build_resnet(resnet8_fashion_mnist(kCheckBatch));
  }
  std::string check_description() const override { return "ResNet-8, batch 8"; }
  std::string quality_name() const override { return "test accuracy"; }

  Status load_data() override { return load_fashion_mnist(fashion_mnist_directory(), &data_); }
  std::int64_t training_examples() const override {
    return recipe_.subset > 0 ? std::min(recipe_.subset, data_.train.count) : data_.train.count;
  }
  std::vector<NamedTensor> training_batch(const std::int64_t* rows, std::int64_t count,
                                          std::uint64_t) const override {
    return batch_of(data_.train, rows, count);
  }
  OptimizerSettings optimizer_settings(std::int64_t step, std::int64_t total_steps) const override {
    const OneCycle schedule{budget().peak_lr, total_steps};
    OptimizerSettings settings;
    settings.learning_rate = static_cast<float>(schedule.learning_rate(step));
    settings.momentum = static_cast<float>(schedule.momentum(step));
    settings.weight_decay = static_cast<float>(recipe_.weight_decay);
    return settings;
  }

  // Accuracy on the whole test set, batch norm on the running statistics.
  Status evaluate(TrainingStep& eval, double* accuracy) override {
    const LabelledImages& test = data_.test;
    std::vector<std::int64_t> rows(static_cast<std::size_t>(kEvalBatch));
    std::int64_t correct = 0;
    std::vector<std::int32_t> predicted;
    for (std::int64_t first = 0; first < test.count; first += kEvalBatch) {
      for (std::int64_t k = 0; k < kEvalBatch; ++k) rows[k] = first + k;
      TB_RETURN_IF_ERROR(eval.set_batch(batch_of(test, rows.data(), kEvalBatch)));
      TB_RETURN_IF_ERROR(eval.run(/*update=*/false, {}));
      TB_RETURN_IF_ERROR(eval.layer_argmax("fc", kFashionMnistClasses, &predicted));
      for (std::int64_t k = 0; k < kEvalBatch; ++k)
        correct += predicted[static_cast<std::size_t>(k)] ==
                   test.labels[static_cast<std::size_t>(first + k)];
    }
    *accuracy = static_cast<double>(correct) / static_cast<double>(test.count);
    return Status::Ok();
  }

  void add_details(nlohmann::json& d) const override {
    d["model"] = "ResNet-8 (3x3 stem 32 ch, one basic block per stage at 32/64/128 ch)";
    d["dataset"] = fmt::format(
        "Fashion-MNIST ({}): {} training images{}, 10,000 test images", fashion_mnist_directory(),
        recipe_.subset > 0 ? recipe_.subset : 60000, recipe_.subset > 0 ? " (a subset)" : "");
    d["recipe"] = {
        {"optimizer", "SGD, momentum cycled 0.95 -> 0.85 -> 0.95 (PyTorch's OneCycleLR)"},
        {"peak_learning_rate", budget().peak_lr},
        {"schedule",
         "one-cycle over the epoch budget: 30% cosine warm-up from peak / 25, cosine decay to "
         "peak / 25e4"},
        {"weight_decay", recipe_.weight_decay},
        {"evaluation", "full test set every half epoch, batch norm on running statistics"}};
  }

  FashionRecipe recipe_;
  FashionMnist data_;
};

const WorkloadKind& ttt_fashion_mnist_kind() {
  static const WorkloadKind kind = [] {
    WorkloadKind kind{
        "ttt-fashion-mnist",
        "time-to-train: ResNet-8 on Fashion-MNIST (Debian's dataset-fashion-mnist) to a test "
        "accuracy, MLPerf's clock; --runs via runs=N (MLPerf aggregate)",
        budget_keys(kBudget)};
    kind.keys.push_back(omitted_at_default(
        integer_key("subset", std::to_string(FashionRecipe{}.subset),
                    "train on the first N images only (0: all), for quick checks", 0)));
    return kind;
  }();
  return kind;
}

std::unique_ptr<Workload> make_ttt_fashion_mnist(const Descriptor& descriptor) {
  DescriptorReader reader(descriptor, ttt_fashion_mnist_kind());
  const TimeToTrainBudget budget = read_budget(reader, kBudget);
  FashionRecipe recipe;
  recipe.subset = reader.integer("subset");
  reader.reject_unknown_keys();
  return std::make_unique<TttFashionMnist>(budget, recipe);
}

}  // namespace

KindEntry ttt_fashion_mnist_kind_entry() {
  return {{ttt_fashion_mnist_kind()}, [](const Descriptor& descriptor, const DeviceInfo&) {
            return make_ttt_fashion_mnist(descriptor);
          }};
}

}  // namespace tb
