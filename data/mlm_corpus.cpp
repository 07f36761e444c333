#include "data/mlm_corpus.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "backends/seeded.h"

namespace tb {
namespace {

bool is_word_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 128;
}

constexpr const char* kSpecialNames[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

}  // namespace

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c <= ' ') {
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    if (is_word_byte(c))
      while (end < text.size() && is_word_byte(static_cast<unsigned char>(text[end]))) ++end;
    std::string word(text.substr(i, end - i));
    for (char& ch : word)
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    words.push_back(std::move(word));
    i = end;
  }
  return words;
}

Status Vocabulary::build(const std::vector<std::vector<std::string>>& texts, std::int64_t size,
                         Vocabulary* out) {
  std::unordered_map<std::string, std::int64_t> counts;
  for (const auto& text : texts)
    for (const std::string& word : text) ++counts[word];
  const std::int64_t words = size - kFirstWord;
  if (words < 1 || static_cast<std::int64_t>(counts.size()) < words)
    return Status::InvalidArgument(
        fmt::format("a vocabulary of {} needs {} distinct words; the training texts have {}", size,
                    std::max<std::int64_t>(words, 1), counts.size()));
  std::vector<std::pair<std::string, std::int64_t>> ranked(counts.begin(), counts.end());
  const auto more_frequent = [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  std::partial_sort(ranked.begin(), ranked.begin() + words, ranked.end(), more_frequent);
  Vocabulary vocabulary;
  vocabulary.words_.assign(std::begin(kSpecialNames), std::end(kSpecialNames));
  for (std::int64_t i = 0; i < words; ++i) vocabulary.words_.push_back(ranked[i].first);
  for (std::size_t id = 0; id < vocabulary.words_.size(); ++id)
    vocabulary.ids_.emplace(vocabulary.words_[id], static_cast<std::int32_t>(id));
  *out = std::move(vocabulary);
  return Status::Ok();
}

std::int32_t Vocabulary::id(const std::string& word) const {
  const auto it = ids_.find(word);
  return it != ids_.end() && it->second >= kFirstWord ? it->second : kUnknown;
}

PackedSequences pack_sequences(const std::vector<std::vector<std::int32_t>>& texts,
                               std::int64_t length, std::int64_t min_maskable) {
  PackedSequences packed;
  packed.length = length;
  std::vector<std::int32_t> sequence{kClassify};
  auto close = [&] {
    const auto maskable = std::count_if(sequence.begin(), sequence.end(),
                                        [](std::int32_t t) { return t >= kFirstWord; });
    if (maskable >= min_maskable)
      packed.tokens.insert(packed.tokens.end(), sequence.begin(), sequence.end());
    else
      ++packed.dropped;
    sequence.assign(1, kClassify);
  };
  for (const auto& text : texts) {
    for (std::size_t i = 0; i <= text.size(); ++i) {
      sequence.push_back(i < text.size() ? text[i] : kSeparator);
      if (static_cast<std::int64_t>(sequence.size()) == length) close();
    }
  }
  return packed;
}

MaskedSequence mask_sequence(const std::int32_t* tokens, std::int64_t length,
                             std::int64_t predictions, std::int64_t vocab_size,
                             std::uint64_t seed) {
  auto draw = [stream = mix64(seed), n = std::uint64_t{0}](std::uint64_t bound) mutable {
    return static_cast<std::int64_t>(mix64(stream + (n++) * kGoldenGamma) % bound);
  };
  MaskedSequence masked;
  masked.input.assign(tokens, tokens + length);
  std::vector<std::int32_t> candidates;
  for (std::int32_t i = 0; i < length; ++i)
    if (tokens[i] >= kFirstWord) candidates.push_back(i);
  const auto available = static_cast<std::int64_t>(candidates.size());
  // A partial Fisher-Yates shuffle picks distinct positions; sorted, as BERT lists them.
  for (std::int64_t k = 0; k < std::min(predictions, available); ++k)
    std::swap(candidates[k], candidates[k + draw(static_cast<std::uint64_t>(available - k))]);
  masked.positions.assign(candidates.begin(),
                          candidates.begin() + std::min(predictions, available));
  std::sort(masked.positions.begin(), masked.positions.end());
  for (const std::int32_t position : masked.positions) {
    masked.labels.push_back(tokens[position]);
    const std::int64_t roll = draw(10);
    if (roll < 8)
      masked.input[position] = kMask;
    else if (roll == 8)
      masked.input[position] = static_cast<std::int32_t>(
          kFirstWord + draw(static_cast<std::uint64_t>(vocab_size - kFirstWord)));
  }
  return masked;
}

Status build_mlm_corpus(const std::vector<std::string>& texts, std::int64_t vocab_size,
                        std::int64_t length, std::int64_t heldout_every, std::int64_t min_maskable,
                        MlmCorpus* out) {
  if (length < 2 || heldout_every < 2)
    return Status::InvalidArgument("sequences need 2 or more tokens, and a held-out split");
  std::vector<std::vector<std::string>> train_words, heldout_words;
  for (std::size_t i = 0; i < texts.size(); ++i)
    (static_cast<std::int64_t>(i) % heldout_every == 0 ? heldout_words : train_words)
        .push_back(split_words(texts[i]));
  TB_RETURN_IF_ERROR(Vocabulary::build(train_words, vocab_size, &out->vocabulary));
  auto encode = [&](const std::vector<std::vector<std::string>>& split) {
    std::vector<std::vector<std::int32_t>> ids;
    ids.reserve(split.size());
    for (const auto& text : split) {
      ids.emplace_back();
      for (const std::string& word : text) ids.back().push_back(out->vocabulary.id(word));
    }
    return pack_sequences(ids, length, min_maskable);
  };
  out->train = encode(train_words);
  out->heldout = encode(heldout_words);
  out->train_texts = static_cast<std::int64_t>(train_words.size());
  out->heldout_texts = static_cast<std::int64_t>(heldout_words.size());
  if (out->train.count() < 1 || out->heldout.count() < 1)
    return Status::InvalidArgument(
        fmt::format("{} texts make {} training and {} held-out sequences of {} tokens: too few",
                    texts.size(), out->train.count(), out->heldout.count(), length));
  return Status::Ok();
}

}  // namespace tb
