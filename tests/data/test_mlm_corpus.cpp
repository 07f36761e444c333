// The masked-LM corpus: WordNet's gloss reader and its checks, the tokenizer, the vocabulary,
// packing and BERT's masking.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "data/data_directory.h"
#include "data/fashion_mnist.h"
#include "data/mlm_corpus.h"
#include "data/wordnet_glosses.h"
#include "tests/temp_dir.h"

namespace tb {
namespace {

TEST(SplitWords, LowerCaseWordsAndPunctuation) {
  EXPECT_EQ(split_words("cast a Shadow; \"it's\"  (2nd)"),
            (std::vector<std::string>{"cast", "a", "shadow", ";", "\"", "it", "'", "s", "\"", "(",
                                      "2nd", ")"}));
  EXPECT_TRUE(split_words("  \t ").empty());
}

TEST(Vocabulary, MostFrequentWordsWithTiesByWord) {
  const std::vector<std::vector<std::string>> texts = {{"b", "a", "c"}, {"c", "b", "d"}};
  Vocabulary vocabulary;
  ASSERT_TRUE(Vocabulary::build(texts, kFirstWord + 3, &vocabulary).ok());
  EXPECT_EQ(vocabulary.size(), kFirstWord + 3);
  EXPECT_EQ(vocabulary.word(kMask), "[MASK]");
  EXPECT_EQ(vocabulary.id("b"), kFirstWord);      // twice, and before c
  EXPECT_EQ(vocabulary.id("c"), kFirstWord + 1);  // twice
  EXPECT_EQ(vocabulary.id("a"), kFirstWord + 2);  // once, and before d
  EXPECT_EQ(vocabulary.id("d"), kUnknown);
  EXPECT_EQ(vocabulary.id("[MASK]"), kUnknown);  // text cannot spell a special token
  const Status too_big = Vocabulary::build(texts, kFirstWord + 5, &vocabulary);
  EXPECT_FALSE(too_big.ok());
  EXPECT_NE(too_big.message().find("4"), std::string::npos) << too_big.message();
}

TEST(PackSequences, OneStreamCutIntoFullSequences) {
  const std::vector<std::vector<std::int32_t>> texts = {{5, 6, 7}, {8, 9}, {kUnknown, kUnknown}};
  // Stream: [CLS] 5 6 7 | [SEP] 8 9 [SEP]... each cut restarts with [CLS].
  // The third, [CLS] [SEP] [UNK] [UNK], has nothing to mask: dropped and counted; the partial
  // fourth, [CLS] [SEP], is dropped too.
  const PackedSequences packed = pack_sequences(texts, 4, 1);
  ASSERT_EQ(packed.count(), 2);
  EXPECT_EQ(packed.tokens,
            (std::vector<std::int32_t>{kClassify, 5, 6, 7, kClassify, kSeparator, 8, 9}));
  EXPECT_EQ(packed.dropped, 1);
  EXPECT_EQ(pack_sequences(texts, 4, 3).count(), 1);
  const PackedSequences five = pack_sequences(texts, 5, 1);
  EXPECT_EQ(five.tokens, (std::vector<std::int32_t>{kClassify, 5, 6, 7, kSeparator, kClassify, 8, 9,
                                                    kSeparator, kUnknown}));
  const PackedSequences stricter = pack_sequences(texts, 5, 3);
  EXPECT_EQ(stricter.count(), 1);
  EXPECT_EQ(stricter.dropped, 1);
}

TEST(MaskSequence, DistinctWordPositionsBertsReplacementRates) {
  std::vector<std::int32_t> tokens = {kClassify, 10, 11, kUnknown, 12, kSeparator, 13, 14, 15, 16};
  const std::int64_t vocab = 100, predictions = 3, trials = 20000;
  std::int64_t masked = 0, random = 0, kept = 0;
  for (std::int64_t t = 0; t < trials; ++t) {
    const MaskedSequence m = mask_sequence(tokens.data(), 10, predictions, vocab, t);
    ASSERT_EQ(m.positions.size(), 3u);
    ASSERT_TRUE(std::is_sorted(m.positions.begin(), m.positions.end()));
    ASSERT_EQ(std::set<std::int32_t>(m.positions.begin(), m.positions.end()).size(), 3u);
    for (std::size_t k = 0; k < m.positions.size(); ++k) {
      const std::int32_t p = m.positions[k];
      ASSERT_GE(tokens[p], kFirstWord) << "position " << p << " is not a word";
      ASSERT_EQ(m.labels[k], tokens[p]);
      const std::int32_t input = m.input[p];
      ASSERT_TRUE(input == kMask || (input >= kFirstWord && input < vocab));
      masked += input == kMask;
      kept += input == tokens[p];
      random += input != kMask && input != tokens[p];
    }
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (std::find(m.positions.begin(), m.positions.end(), i) == m.positions.end()) {
        ASSERT_EQ(m.input[i], tokens[i]);
      }
    }
  }
  const double total = static_cast<double>(trials * predictions);
  // 60,000 draws: the binomial standard deviation of each rate is under 0.2%.
  EXPECT_NEAR(masked / total, 0.80, 0.01);
  // A random word is the original one 1 time in 95, counted as kept.
  EXPECT_NEAR(random / total, 0.10 * 94 / 95, 0.01);
  EXPECT_NEAR(kept / total, 0.10 + 0.10 / 95, 0.01);
  const MaskedSequence again = mask_sequence(tokens.data(), 10, predictions, vocab, 7);
  EXPECT_EQ(again.input, mask_sequence(tokens.data(), 10, predictions, vocab, 7).input);
  EXPECT_NE(again.positions, mask_sequence(tokens.data(), 10, predictions, vocab, 8).positions);
}

using testing_support::TempDir;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The real files (scripts/setup.sh installs Debian's wordnet-base).
TEST(WordNetGlosses, ReadsEverySynsetsGloss) {
  std::vector<std::string> glosses;
  const Status status = load_wordnet_glosses(wordnet_directory(), &glosses);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(glosses.size(), 117659u);
  EXPECT_EQ(glosses[0],
            "that which is perceived or known or inferred to have its own distinct existence "
            "(living or nonliving)");
  for (const std::string& gloss : glosses) ASSERT_FALSE(gloss.empty());
}

TEST(WordNetGlosses, RefusesMissingAndCorruptFiles) {
  TempDir dir("trainbench-wordnet");
  std::vector<std::string> glosses;
  Status status = load_wordnet_glosses(dir.path(), &glosses);
  EXPECT_EQ(status.code(), StatusCode::invalid_argument);  // failed, not skipped
  EXPECT_NE(status.message().find("data.noun"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("wordnet-base"), std::string::npos) << status.message();

  const std::string header = "  1 This software and database is being provided.\n";
  ASSERT_EQ(header.size(), 50u);
  const std::string synset = "00000050 03 n 01 entity 0 000 | that which is\n";
  write_file(dir.file("data.noun"), header + synset);
  status = load_wordnet_glosses(dir.path(), &glosses);  // offset right, but one synset only
  EXPECT_NE(status.message().find("82115"), std::string::npos) << status.message();
  write_file(dir.file("data.noun"), header + "00000049" + synset.substr(8));  // the wrong offset
  status = load_wordnet_glosses(dir.path(), &glosses);
  EXPECT_NE(status.message().find("byte 50"), std::string::npos) << status.message();
  write_file(dir.file("data.noun"), header + "00000050 03 n 01 entity 0 000 no gloss\n");
  EXPECT_FALSE(load_wordnet_glosses(dir.path(), &glosses).ok());
  write_file(dir.file("data.noun"), header + synset.substr(0, synset.size() - 1));  // cut short
  status = load_wordnet_glosses(dir.path(), &glosses);
  EXPECT_NE(status.message().find("truncated"), std::string::npos) << status.message();
}

// The datasets are where Debian installs them unless a variable names a copy elsewhere (the
// packed GPU archive carries one).
TEST(DataDirectory, AVariableNamesACopyElsewhere) {
  const char* saved = std::getenv("TRAINBENCH_WORDNET_DIR");
  const std::string restore = saved ? saved : "";
  unsetenv("TRAINBENCH_WORDNET_DIR");
  EXPECT_EQ(wordnet_directory(), kWordNetDirectory);
  setenv("TRAINBENCH_WORDNET_DIR", "", 1);  // empty: as if unset
  EXPECT_EQ(wordnet_directory(), kWordNetDirectory);
  setenv("TRAINBENCH_WORDNET_DIR", "/opt/copy/wordnet", 1);
  EXPECT_EQ(wordnet_directory(), "/opt/copy/wordnet");
  EXPECT_EQ(fashion_mnist_directory(),
            data_directory("TRAINBENCH_FASHION_MNIST_DIR", kFashionMnistDirectory));
  if (saved)
    setenv("TRAINBENCH_WORDNET_DIR", restore.c_str(), 1);
  else
    unsetenv("TRAINBENCH_WORDNET_DIR");
}

TEST(MlmCorpus, WordNetSplitVocabularyAndSequences) {
  std::vector<std::string> glosses;
  ASSERT_TRUE(load_wordnet_glosses(wordnet_directory(), &glosses).ok());
  MlmCorpus corpus;
  const Status status = build_mlm_corpus(glosses, 4096, 64, 20, 9, &corpus);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(corpus.heldout_texts, 5883);  // every 20th of 117,659
  EXPECT_EQ(corpus.train_texts, 117659 - 5883);
  EXPECT_EQ(corpus.vocabulary.size(), 4096);
  // The most frequent tokens of the training glosses: the quotes around examples, then "the".
  EXPECT_EQ(corpus.vocabulary.word(kFirstWord), "\"");
  EXPECT_EQ(corpus.vocabulary.word(kFirstWord + 1), "the");
  EXPECT_GT(corpus.train.count(), 20 * corpus.heldout.count() * 9 / 10);
  EXPECT_LT(corpus.train.count(), 20 * corpus.heldout.count() * 11 / 10);
  for (const PackedSequences* split : {&corpus.train, &corpus.heldout})
    for (std::int64_t i = 0; i < split->count(); ++i) {
      const std::int32_t* sequence = split->sequence(i);
      ASSERT_EQ(sequence[0], kClassify);
      ASSERT_GE(std::count_if(sequence, sequence + 64, [](int t) { return t >= kFirstWord; }), 9);
      for (int k = 1; k < 64; ++k)
        ASSERT_TRUE(sequence[k] != kPad && sequence[k] != kClassify && sequence[k] != kMask &&
                    sequence[k] < 4096);
    }
  MlmCorpus tiny;
  EXPECT_FALSE(build_mlm_corpus({"a b", "c d"}, 8, 64, 20, 1, &tiny).ok());
}

}  // namespace
}  // namespace tb
