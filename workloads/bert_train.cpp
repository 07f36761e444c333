// bert-train: whole BERT pre-training steps (forward, masked-LM and next-sentence losses,
// backward, AdamW or LAMB update) back to back on one backend, on a fixed seeded batch.
#include <cmath>

#include <fmt/format.h>

#include "models/bert.h"
#include "workloads/kind_registry.h"
#include "workloads/training_workload.h"

namespace tb {
namespace {

const WorkloadKind& bert_train_kind();  // the key table, with the factory below

struct BertTrainConfig {
  std::string model = "base";
  BertConfig bert;
  StepOptions step;
  OptimizerSettings settings;
  BucketOptions buckets;
};

// Whole-step gradient check on the tiny configuration (2 layers, hidden 128; batch 2 of 32
// tokens, padded, dropout on): no ReLU or max-pool kinks and well-conditioned layer norms, so
// fp32 and f64 gradients agree to about 6e-7 (measured on both CPU backends); wiring errors
// are of order one.
constexpr double kTinyGradientTolerance = 1e-4;

class BertTrainWorkload final : public TrainingWorkload {
 public:
  explicit BertTrainWorkload(const BertTrainConfig& config)
      : TrainingWorkload(build_bert(config.bert), config.step, config.settings, config.buckets),
        config_(config) {}

  WorkCounts counts() const override {
    WorkCounts counts = TrainingWorkload::counts();
    counts.tokens = static_cast<double>(config_.bert.batch * config_.bert.sequence);
    return counts;
  }

  Descriptor descriptor() const override {
    Descriptor d = canonical_descriptor(
        bert_train_kind(), {{"model", config_.model},
                            {"batch", std::to_string(config_.bert.batch)},
                            {"seq", std::to_string(config_.bert.sequence)},
                            {"dtype", std::string(dtype_name(config_.step.dtype))},
                            {"optimizer", optimizer_name(config_.step.optimizer)},
                            {"dropout", fmt::format("{:g}", config_.bert.dropout)},
                            {"lr", fmt::format("{:g}", config_.settings.learning_rate)},
                            {"attention", config_.bert.fused_attention ? "fused" : "unfused"},
                            {"bucket_mb", std::to_string(config_.buckets.bucket_bytes >> 20)},
                            {"overlap", config_.buckets.overlap ? "1" : "0"}});
    return d;
  }

 private:
  ReducedCase reduced_case(std::uint64_t seed, int ranks) const override {
    BertConfig tiny = bert_config("tiny", 2 * ranks, 32);
    tiny.dropout = config_.bert.dropout;
    tiny.fused_attention = config_.bert.fused_attention;
    Network network = build_bert(tiny);
    return {std::move(network), bert_batch(tiny, seed, /*padded=*/true),
            "tiny BERT (2 layers, hidden 128, batch 2 of 32 tokens, padded)",
            kTinyGradientTolerance};
  }
  SmallBatchCase small_batch_case(std::uint64_t seed) const override {
    BertConfig small = config_.bert;
    small.batch = kSmallBatch;
    return {build_bert(small), bert_batch(small, seed)};
  }
  std::vector<NamedTensor> batch(std::uint64_t seed) const override {
    return bert_batch(config_.bert, seed);
  }
  double chance_loss() const override {
    return std::log(static_cast<double>(config_.bert.vocab)) + std::log(2.0);
  }
  std::string chance_description() const override { return "near ln(vocabulary) + ln(2)"; }
  MixedPrecisionParts mixed_precision_parts() const override {
    return {"activations, linear layers and embeddings",
            "master weights, gradients, optimizer state, layer-norm scale and shift, and loss"};
  }
  void add_details(nlohmann::json& d) const override {
    const BertConfig& c = config_.bert;
    d["model"] = fmt::format("BertForPreTraining ({}, HuggingFace names)", config_.model);
    d["config"] = {
        {"layers", c.layers},
        {"hidden", c.hidden},
        {"heads", c.heads},
        {"intermediate", c.intermediate},
        {"vocabulary", c.vocab},
        {"sequence", c.sequence},
        {"predictions_per_sequence", c.predictions},
        {"dropout", c.dropout},
        {"attention", c.fused_attention ? "fused (one op per layer; no dropout on the attention "
                                          "probabilities; padding by sequence length)"
                                        : "unfused (scores GEMM, masked softmax, dropout, context "
                                          "GEMM)"}};
    d["tokens_per_step"] = c.batch * c.sequence;
    d["flop_formula"] =
        "per sequence, 3 x forward x 2 FLOPs per multiply-add of every GEMM: per layer "
        "4 S H^2 (Q, K, V, output) + 2 S H F (feed-forward) + 2 S^2 H (attention scores and "
        "context); pooler H^2; masked-LM head P H^2 + P H V on the P gathered positions; "
        "next-sentence 2 H (fused attention counts the same two attention GEMMs, not its "
        "backward's recomputation of the scores)";
  }

  BertTrainConfig config_;
};

const WorkloadKind& bert_train_kind() {
  static const WorkloadKind kind{
      "bert-train",
      "BERT pre-training steps (masked-LM + next-sentence losses, backward, AdamW or LAMB) on a "
      "fixed batch",
      {choice_key("model", "base", {"base", "large", "tiny"}, "BERT's size"),
       integer_key("batch", "8", "sequences per step", 1, kLargestBatch),
       integer_key("seq", "128", "tokens per sequence", 2, kLongestSequence),
       choice_key("dtype", "f32", {"f32", "tf32", "bf16", "f16"}, "the step's precision"),
       choice_key("optimizer", "adamw", {"adamw", "lamb"},
                  "AdamW or LAMB (betas 0.9, 0.999, epsilon 1e-6, weight decay 0.01)"),
       number_key("dropout", "0.1", "dropout probability", kProbability),
       {.name = "lr",
        .type = KeyType::number,
        .range = kLearningRate,
        .derived = "`0.0001` (adamw), `0.002` (lamb)",
        .help = "learning rate"},
       omitted_at_default(choice_key("attention", "unfused", {"unfused", "fused"},
                                     "fused: one attention op per layer, a separate variant")),
       bucket_mb_key(),
       overlap_key()}};
  return kind;
}

std::unique_ptr<Workload> make_bert_train(const Descriptor& descriptor) {
  DescriptorReader reader(descriptor, bert_train_kind());
  BertTrainConfig config;
  config.model = reader.choice("model");
  const std::int64_t batch = reader.integer("batch");
  const std::int64_t sequence = reader.integer("seq");
  config.bert = bert_config(config.model, batch, sequence);
  config.bert.dropout = static_cast<float>(reader.number("dropout"));
  config.bert.fused_attention = reader.choice("attention") == "fused";
  config.step.dtype = parse_dtype(reader.choice("dtype"));
  const std::string optimizer = reader.choice("optimizer");
  config.step.optimizer = optimizer == "adamw" ? OptimizerKind::adamw : OptimizerKind::lamb;
  // The PyTorch peer's settings: betas (0.9, 0.999), epsilon 1e-6, weight decay 0.01; lr 1e-4
  // for AdamW, 2e-3 for LAMB (its step is lr |w| per tensor, so it needs the larger rate).
  const double default_lr = config.step.optimizer == OptimizerKind::lamb ? 2e-3 : 1e-4;
  config.settings.learning_rate = static_cast<float>(reader.number_or("lr", default_lr));
  config.settings.weight_decay = 0.01f;
  config.settings.beta1 = 0.9f, config.settings.beta2 = 0.999f, config.settings.epsilon = 1e-6f;
  config.buckets = read_bucket_options(reader);
  reader.reject_unknown_keys();
  return std::make_unique<BertTrainWorkload>(config);
}

}  // namespace

KindEntry bert_train_kind_entry() {
  return {{bert_train_kind()}, [](const Descriptor& descriptor, const DeviceInfo&) {
            return make_bert_train(descriptor);
          }};
}

}  // namespace tb
