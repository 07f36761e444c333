// A workload kind's descriptor keys, declared once in a table beside its factory: name,
// default, choices (or a type) and meaning. The descriptor reader parses with it, the
// canonical descriptor prints in its order, `trainbench list` and docs/workloads.md show it.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backends/numbers.h"

namespace tb {

class Descriptor;

enum class KeyType { integer, number, text, choice, shape_list };

struct KeySpec {
  std::string name{};
  KeyType type = KeyType::text;
  // The default as a descriptor writes it; empty where there is none (a label, a required
  // key) or where the workload works it out (`same_as`, `derived`).
  std::string fallback{};
  std::vector<std::string> choices{};  // KeyType::choice
  std::int64_t min = 1;                // KeyType::integer: the smallest value accepted
  std::int64_t max = std::numeric_limits<std::int64_t>::max();  // and the largest
  NumberRange range{};    // KeyType::number: finite, and within this range
  std::string same_as{};  // the default is this other key's value
  std::string derived{};  // the default, worked out by the workload, in words
  std::string also{};     // accepted besides the type, in words ("`sweep`")
  bool required = false;
  bool omit_default = false;  // the canonical descriptor leaves the key out at its default
  std::string help{};
};

// The common ranges of number keys: a probability or fraction in [0, 1), a learning rate in
// (0, 10], a GEMM scale that stays finite in fp32 with room for its sums.
inline constexpr NumberRange kProbability{.min = 0, .max = 1, .max_excluded = true};
inline constexpr NumberRange kLearningRate{.min = 0, .max = 10, .min_excluded = true};
inline constexpr NumberRange kScale{.min = -1e6, .max = 1e6};
// The bounds of the training workloads' sizes: far past any machine's memory, and small enough
// that no activation, parameter or byte count of their networks can wrap.
inline constexpr std::int64_t kLargestBatch = 1 << 16, kLongestSequence = 1 << 16,
                              kLargestImage = 2048, kWidestStage = 1024, kMostClasses = 1 << 20;

// The common rows, and a spec left out of the canonical descriptor at its default.
KeySpec choice_key(std::string name, std::string fallback, std::vector<std::string> choices,
                   std::string help);
KeySpec integer_key(std::string name, std::string fallback, std::string help, std::int64_t min = 1,
                    std::int64_t max = std::numeric_limits<std::int64_t>::max());
KeySpec required_integer_key(std::string name, std::string help);
// An integer whose default is the value of key `other`.
KeySpec integer_like_key(std::string name, std::string other, std::string help,
                         std::int64_t min = 1);
KeySpec number_key(std::string name, std::string fallback, std::string help,
                   NumberRange range = {});
KeySpec omitted_at_default(KeySpec spec);
KeySpec label_key();   // name=LABEL, kept in the descriptor (gemm, conv)
KeySpec shapes_key();  // shapes=LIST, expanded before the workload is made (gemm, conv)

// One workload kind: its name, what it measures, and its keys in canonical-descriptor order.
struct WorkloadKind {
  std::string name;
  std::string summary;
  std::vector<KeySpec> keys;

  const KeySpec* find(std::string_view key) const;
  // The spec of a key the workload's code names; std::logic_error for one the table lacks.
  const KeySpec& at(std::string_view key) const;
};

// The canonical descriptor of a case: the keys of `values` (name -> printed value) in the
// table's order, a key with omit_default left out at its default. std::logic_error for a value
// whose key the table lacks.
Descriptor canonical_descriptor(const WorkloadKind& kind,
                                const std::map<std::string, std::string>& values);

// The cells of a key's row: `default`, `choices` (or the type) and the meaning.
struct KeyRow {
  std::string key, fallback, choices, meaning;
};
KeyRow key_row(const KeySpec& spec);

// "[key=f32|bf16]"-style usage of a kind, for `trainbench list`.
std::string key_usage(const WorkloadKind& kind);

// Every kind's key table in markdown: "## <kind>", its summary, then
//   | key | default | choices | meaning |
std::string key_tables_markdown(const std::vector<WorkloadKind>& kinds);

// Where the key tables of a markdown document (docs/workloads.md) disagree with `kinds`: one
// line per difference, naming the kind and the key. Empty when they agree.
std::vector<std::string> key_table_differences(const std::vector<WorkloadKind>& kinds,
                                               std::string_view markdown);

}  // namespace tb
