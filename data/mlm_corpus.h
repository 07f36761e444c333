// A masked-language-model corpus from plain texts: a lower-case word tokenizer, a vocabulary
// of the training split's most frequent words, texts packed into fixed-length sequences, and
// BERT's masking.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/status.h"

namespace tb {

// Token ids below kFirstWord are BERT's special tokens.
enum SpecialToken : std::int32_t {
  kPad = 0,
  kUnknown = 1,
  kClassify = 2,
  kSeparator = 3,
  kMask = 4
};
inline constexpr std::int32_t kFirstWord = 5;

// Lower-case words: runs of letters, digits and bytes above 127 (Latin-1 letters); every other
// printable character is a token of its own. "cast a shadow; \"it's\"" ->
// cast a shadow ; " it ' s "
std::vector<std::string> split_words(std::string_view text);

class Vocabulary {
 public:
  // The special tokens and the `size - kFirstWord` most frequent words of `texts` (ties broken
  // by the word, so the vocabulary is the same on every machine). Fails if `texts` holds fewer
  // distinct words.
  static Status build(const std::vector<std::vector<std::string>>& texts, std::int64_t size,
                      Vocabulary* out);
  std::int32_t id(const std::string& word) const;  // kUnknown for a word outside it
  std::int64_t size() const { return static_cast<std::int64_t>(words_.size()); }
  const std::string& word(std::int32_t id) const { return words_[static_cast<std::size_t>(id)]; }

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, std::int32_t> ids_;
};

// Texts packed as one stream: [CLS], then each text's tokens followed by [SEP], cut into
// sequences of `length` (a text may continue into the next sequence, as RoBERTa packs them;
// the partial last sequence is dropped). Sequences with fewer than `min_maskable` maskable
// tokens (words of the vocabulary) are dropped and counted.
struct PackedSequences {
  std::int64_t length = 0;
  std::vector<std::int32_t> tokens;  // count x length
  std::int64_t dropped = 0;
  std::int64_t count() const {
    return length > 0 ? static_cast<std::int64_t>(tokens.size()) / length : 0;
  }
  const std::int32_t* sequence(std::int64_t i) const { return tokens.data() + i * length; }
};
PackedSequences pack_sequences(const std::vector<std::vector<std::int32_t>>& texts,
                               std::int64_t length, std::int64_t min_maskable);

// BERT's masking of one sequence: `predictions` distinct positions drawn among the maskable
// tokens (never a special token or [UNK]); the input there becomes [MASK] 80% of the time, a
// random word 10% and stays 10%; the label is the original token. Deterministic in `seed`.
// The sequence must hold at least `predictions` maskable tokens.
struct MaskedSequence {
  std::vector<std::int32_t> input;
  std::vector<std::int32_t> positions, labels;
};
MaskedSequence mask_sequence(const std::int32_t* tokens, std::int64_t length,
                             std::int64_t predictions, std::int64_t vocab_size, std::uint64_t seed);

struct MlmCorpus {
  Vocabulary vocabulary;
  PackedSequences train, heldout;
  std::int64_t train_texts = 0, heldout_texts = 0;
};
// Every `heldout_every`-th text is held out for evaluation; the vocabulary comes from the
// others only.
Status build_mlm_corpus(const std::vector<std::string>& texts, std::int64_t vocab_size,
                        std::int64_t length, std::int64_t heldout_every, std::int64_t min_maskable,
                        MlmCorpus* out);

}  // namespace tb
