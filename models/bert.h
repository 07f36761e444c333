// BERT pre-training as Google released it and HuggingFace's BertForPreTraining builds it:
// embeddings (word, position, token type) with layer norm; encoder layers of multi-head
// self-attention and a GELU feed-forward, each with residual and post layer norm; the pooler;
// the masked-LM head (dense, GELU, layer norm, decoder tied to the word embeddings, own bias)
// on the masked positions only, gathered first as MLPerf's reference does; the next-sentence
// head. Parameter names are HuggingFace's; BERT-base has 110,106,428 parameters and
// BERT-large 336,226,108 (the tied decoder weight counted once).
//
// Work: every GEMM counted (Network::forward_macs_per_sample): per layer and sequence the Q,
// K, V and output projections 4 S H^2, the feed-forward 2 S H F, attention scores and context
// 2 S^2 H; the pooler H^2, the MLM head P H^2 + P H V on the P gathered positions, the
// next-sentence head 2 H. A step counts as 3 forward passes, 2 FLOPs per multiply-add:
// BERT-base at S = 128, P = 20: 69.9 GFLOP per sequence.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "models/network.h"
#include "models/training_step.h"

namespace tb {

struct BertConfig {
  std::int64_t layers = 12, hidden = 768, heads = 12, intermediate = 3072;
  std::int64_t vocab = 30522, positions = 512, token_types = 2;
  std::int64_t batch = 8, sequence = 128;
  std::int64_t predictions = 20;  // masked positions per sequence (20 at 128, 76 at 512)
  float dropout = 0.1f;           // 0 removes the dropout layers
  // One fused attention op per layer (LayerKind::attention: a library's flash attention)
  // instead of scores, softmax, dropout and context. It has no dropout on the attention
  // probabilities (the others keep `dropout`) and takes each sequence's length
  // ("attention_lengths") instead of the additive mask.
  bool fused_attention = false;
  // false: masked-LM only, without the pooler and the next-sentence head (as RoBERTa trains)
  bool next_sentence = true;
  // RMSNorm (a weight, no bias) wherever BERT has a layer norm: not a published model, a
  // network that runs the op in a whole step (its op check and damage tests).
  bool rms_norm = false;
};

// "base", "large" or "tiny" (2 layers, hidden 128, 2 heads, feed-forward 512: tests) at the
// given batch and sequence length, with BERT's number of predictions for that length (at
// most the length). Throws UsageError for another name or a length outside [2, 512].
BertConfig bert_config(std::string_view model, std::int64_t batch, std::int64_t sequence);

// Throws UsageError for a configuration that cannot be built (heads not dividing hidden, more
// predictions than tokens, ...).
Network build_bert(const BertConfig& config);

// A seeded pre-training batch: random token ids, segment A then B (token types 0 then 1),
// `predictions` distinct masked positions per sequence with random labels, random
// next-sentence labels (without the next-sentence head: no pooler rows and no such labels). With
// `padded`, each sequence has a seeded length in [S/2, S]: the attention mask (or, for fused
// attention, the lengths) drops the rest and the masked positions fall inside the length.
std::vector<NamedTensor> bert_batch(const BertConfig& config, std::uint64_t seed,
                                    bool padded = false);

}  // namespace tb
