#include "models/bert.h"

#include <cmath>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "backends/seeded.h"
#include "backends/status.h"

namespace tb {
namespace {

// The additive attention mask for a padded position, as BERT's implementation uses it.
constexpr double kMaskedLogit = -10000.0;

class Builder {
 public:
  Builder(Network& network, const BertConfig& config) : net_(network), config_(config) {}

  int parameter(const std::string& name, std::vector<std::int64_t> dims, ParamInit init) {
    return net_.add_parameter({name, std::move(dims), init});
  }
  // A layer on [rows, features] tensors.
  int layer(Layer layer, std::int64_t rows, std::int64_t features) {
    return net_.add_layer(std::move(layer), {rows, features, 1, 1});
  }
  int linear(const std::string& name, int input, std::int64_t out) {
    const TensorShape in = net_.tensors()[input];
    Layer dense{name, LayerKind::linear, {input}};
    dense.out_channels = out;
    dense.params = {parameter(name + ".weight", {out, in.c}, ParamInit::normal_0_02),
                    parameter(name + ".bias", {out}, ParamInit::zeros)};
    return layer(std::move(dense), in.n, out);
  }
  int layer_norm(const std::string& name, int input) {
    const TensorShape in = net_.tensors()[input];
    Layer norm{name, config_.rms_norm ? LayerKind::rms_norm : LayerKind::layer_norm, {input}};
    norm.params = {parameter(name + ".weight", {in.c}, ParamInit::ones)};
    if (!config_.rms_norm)
      norm.params.push_back(parameter(name + ".bias", {in.c}, ParamInit::zeros));
    return layer(std::move(norm), in.n, in.c);
  }
  int unary(const std::string& name, LayerKind kind, int input) {
    const TensorShape in = net_.tensors()[input];
    return layer({name, kind, {input}}, in.n, in.c);
  }
  int dropout(const std::string& name, int input) {
    if (config_.dropout <= 0) return input;
    const TensorShape in = net_.tensors()[input];
    Layer drop{name, LayerKind::dropout, {input}};
    drop.probability = config_.dropout;
    return layer(std::move(drop), in.n, in.c);
  }
  int add(const std::string& name, int a, int b) {
    const TensorShape in = net_.tensors()[a];
    return layer({name, LayerKind::add, {a, b}}, in.n, in.c);
  }
  int embedding(const std::string& name, int ids, std::int64_t rows, int table) {
    Layer lookup{name, LayerKind::embedding, {ids}};
    lookup.params = {table};
    return layer(std::move(lookup), net_.tensors()[ids].elements(), rows);
  }
  int gather(const std::string& name, int source, int row_ids) {
    return layer({name, LayerKind::gather_rows, {source, row_ids}},
                 net_.tensors()[row_ids].elements(), net_.tensors()[source].c);
  }

  // Self-attention, its output projection, residual and layer norm. `mask`: the additive
  // mask [B, S], or for fused attention the lengths [B].
  int attention(const std::string& name, int x, int mask) {
    const std::int64_t b = config_.batch, s = config_.sequence, heads = config_.heads;
    const std::string self = name + ".self";
    const int q = linear(self + ".query", x, config_.hidden),
              k = linear(self + ".key", x, config_.hidden),
              v = linear(self + ".value", x, config_.hidden);
    auto attention_layer = [&](const std::string& suffix, LayerKind kind, std::vector<int> in) {
      Layer part{self + suffix, kind, std::move(in)};
      part.heads = heads, part.sequence = s;
      part.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(config_.hidden / heads)));
      return part;
    };
    if (config_.fused_attention)
      return output(
          name + ".output",
          layer(attention_layer("", LayerKind::attention, {q, k, v, mask}), b * s, config_.hidden),
          x);
    int p =
        layer(attention_layer(".scores", LayerKind::attention_scores, {q, k}), b * heads * s, s);
    p = layer(attention_layer(".softmax", LayerKind::attention_softmax, {p, mask}), b * heads * s,
              s);
    p = dropout(self + ".dropout", p);
    const int context = layer(attention_layer(".context", LayerKind::attention_context, {p, v}),
                              b * s, config_.hidden);
    return output(name + ".output", context, x);
  }
  // dense, dropout, residual, layer norm
  int output(const std::string& name, int input, int residual) {
    const int y = dropout(name + ".dropout", linear(name + ".dense", input, config_.hidden));
    return layer_norm(name + ".LayerNorm", add(name + ".residual", y, residual));
  }

 private:
  Network& net_;
  const BertConfig& config_;
};

// A configuration build_bert can build, or a UsageError saying what is wrong.
void check_config(const BertConfig& c) {
  if (c.batch < 1 || c.layers < 1 || c.heads < 1 || c.hidden % c.heads != 0)
    throw UsageError("BERT needs batch >= 1, layers >= 1 and heads dividing hidden");
  if (c.sequence < 2 || c.sequence > c.positions || c.predictions < 1 || c.predictions > c.sequence)
    throw UsageError(
        fmt::format("BERT needs 2 <= sequence ({}) <= positions ({}) and "
                    "1 <= predictions ({}) <= sequence",
                    c.sequence, c.positions, c.predictions));
  if (!(c.dropout >= 0 && c.dropout < 1)) throw UsageError("BERT dropout must be in [0, 1)");
}

}  // namespace

BertConfig bert_config(std::string_view model, std::int64_t batch, std::int64_t sequence) {
  BertConfig config;
  if (model == "large") {
    config.layers = 24, config.hidden = 1024, config.heads = 16, config.intermediate = 4096;
  } else if (model == "tiny") {
    config.layers = 2, config.hidden = 128, config.heads = 2, config.intermediate = 512;
  } else if (model != "base") {
    throw UsageError(fmt::format("unknown BERT model '{}' (base, large, tiny)", model));
  }
  if (sequence < 2 || sequence > config.positions)
    throw UsageError(
        fmt::format("BERT sequence length {} is outside [2, {}]", sequence, config.positions));
  config.batch = batch;
  config.sequence = sequence;
  // BERT's two pre-training phases: 20 predictions at length 128, 76 at 512.
  config.predictions = std::min<std::int64_t>(sequence <= 128 ? 20 : 76, sequence);
  return config;
}

Network build_bert(const BertConfig& c) {
  check_config(c);
  Network net;
  Builder build(net, c);
  const std::int64_t tokens = c.batch * c.sequence, masked = c.batch * c.predictions;
  net.batch = c.batch;
  auto indices = [&](const char* name, std::int64_t count, std::int64_t bound) {
    return net.add_input({name, -1, /*indices=*/true, bound}, {count, 1, 1, 1});
  };
  const int input_ids = indices("input_ids", tokens, c.vocab);
  const int token_type_ids = indices("token_type_ids", tokens, c.token_types);
  const int position_ids = indices("position_ids", tokens, c.positions);
  // Fused attention takes each sequence's length, in [1, S], instead of the additive mask.
  const int attention_mask =
      c.fused_attention
          ? net.add_input({"attention_lengths", -1, /*indices=*/true, c.sequence + 1, 1},
                          {c.batch, 1, 1, 1})
          : net.add_input({"attention_mask"}, {c.batch, c.sequence, 1, 1});
  const int first_tokens = c.next_sentence ? indices("first_token_rows", c.batch, tokens) : -1;
  const int masked_rows = indices("masked_lm_rows", masked, tokens);
  const int masked_labels = indices("masked_lm_labels", masked, c.vocab);
  const int next_sentence_labels =
      c.next_sentence ? indices("next_sentence_labels", c.batch, 2) : -1;

  const std::string e = "bert.embeddings";
  const int word_table =
      build.parameter(e + ".word_embeddings.weight", {c.vocab, c.hidden}, ParamInit::normal_0_02);
  int x = build.embedding(e + ".word_embeddings", input_ids, c.hidden, word_table);
  x = build.add(e + ".add_position", x,
                build.embedding(e + ".position_embeddings", position_ids, c.hidden,
                                build.parameter(e + ".position_embeddings.weight",
                                                {c.positions, c.hidden}, ParamInit::normal_0_02)));
  x = build.add(
      e + ".add_token_type", x,
      build.embedding(e + ".token_type_embeddings", token_type_ids, c.hidden,
                      build.parameter(e + ".token_type_embeddings.weight",
                                      {c.token_types, c.hidden}, ParamInit::normal_0_02)));
  x = build.dropout(e + ".dropout", build.layer_norm(e + ".LayerNorm", x));

  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::string name = fmt::format("bert.encoder.layer.{}", l);
    x = build.attention(name + ".attention", x, attention_mask);
    const int hidden = build.unary(name + ".intermediate.gelu", LayerKind::gelu,
                                   build.linear(name + ".intermediate.dense", x, c.intermediate));
    x = build.output(name + ".output", hidden, x);
  }

  const int pooled =
      c.next_sentence
          ? build.unary(
                "bert.pooler.tanh", LayerKind::tanh,
                build.linear("bert.pooler.dense",
                             build.gather("bert.pooler.first_token", x, first_tokens), c.hidden))
          : -1;
  // Masked-LM head: the bias parameter comes first, as HuggingFace lists it.
  const int decoder_bias = build.parameter("cls.predictions.bias", {c.vocab}, ParamInit::zeros);
  const std::string t = "cls.predictions.transform";
  int h = build.gather("cls.predictions.gather", x, masked_rows);
  h = build.layer_norm(t + ".LayerNorm", build.unary(t + ".gelu", LayerKind::gelu,
                                                     build.linear(t + ".dense", h, c.hidden)));
  Layer decoder{"cls.predictions.decoder", LayerKind::linear, {h}};
  decoder.out_channels = c.vocab;
  decoder.params = {word_table, decoder_bias};
  const int logits = build.layer(std::move(decoder), masked, c.vocab);
  build.layer({"cls.predictions.loss", LayerKind::softmax_cross_entropy, {logits, masked_labels}},
              1, 1);
  if (!c.next_sentence) return net;
  const int relationship = build.linear("cls.seq_relationship", pooled, 2);
  build.layer({"cls.seq_relationship.loss",
               LayerKind::softmax_cross_entropy,
               {relationship, next_sentence_labels}},
              1, 1);
  return net;
}

std::vector<NamedTensor> bert_batch(const BertConfig& c, std::uint64_t seed, bool padded) {
  const std::int64_t tokens = c.batch * c.sequence, masked = c.batch * c.predictions;
  auto draw = [stream = mix64(seed), n = std::uint64_t{0}](std::uint64_t bound) mutable {
    return static_cast<std::int64_t>(mix64(stream + (n++) * kGoldenGamma) % bound);
  };
  NamedTensor ids{"input_ids", {tokens}, {}, true}, types{"token_type_ids", {tokens}, {}, true},
      positions{"position_ids", {tokens}, {}, true},
      mask{"attention_mask", {c.batch, c.sequence}, {}, false},
      lengths{"attention_lengths", {c.batch}, {}, true},
      first{"first_token_rows", {c.batch}, {}, true}, rows{"masked_lm_rows", {masked}, {}, true},
      labels{"masked_lm_labels", {masked}, {}, true},
      next{"next_sentence_labels", {c.batch}, {}, true};
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t length =
        padded ? std::max(c.predictions, c.sequence / 2 + draw(c.sequence - c.sequence / 2 + 1))
               : c.sequence;
    for (std::int64_t s = 0; s < c.sequence; ++s) {
      ids.values.push_back(static_cast<double>(draw(static_cast<std::uint64_t>(c.vocab))));
      types.values.push_back(s >= c.sequence / 2 ? 1.0 : 0.0);
      positions.values.push_back(static_cast<double>(s));
      mask.values.push_back(s < length ? 0.0 : kMaskedLogit);
    }
    lengths.values.push_back(static_cast<double>(length));
    if (c.next_sentence) first.values.push_back(static_cast<double>(b * c.sequence));
    // Distinct positions inside the length: a partial Fisher-Yates shuffle.
    std::vector<std::int64_t> order(static_cast<std::size_t>(length));
    std::iota(order.begin(), order.end(), 0);
    for (std::int64_t k = 0; k < c.predictions; ++k) {
      std::swap(order[k], order[k + draw(static_cast<std::uint64_t>(length - k))]);
      rows.values.push_back(static_cast<double>(b * c.sequence + order[k]));
      labels.values.push_back(static_cast<double>(draw(static_cast<std::uint64_t>(c.vocab))));
    }
    if (c.next_sentence) next.values.push_back(static_cast<double>(draw(2)));
  }
  NamedTensor& keys = c.fused_attention ? lengths : mask;
  if (!c.next_sentence) return {ids, types, positions, keys, rows, labels};
  return {ids, types, positions, keys, first, rows, labels, next};
}

}  // namespace tb
