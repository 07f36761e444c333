// A workload descriptor: one line of text, "kind key=value key=value ...", that parses,
// prints back and reproduces a case (benchdnn-style). Keys keep their order.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "workloads/keys.h"

namespace tb {

class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(std::string kind) : kind_(std::move(kind)) {}

  // Throws UsageError on a malformed line (no kind, a token without '=', a repeated key).
  static Descriptor parse(std::string_view line);
  std::string to_string() const;

  const std::string& kind() const { return kind_; }
  const std::vector<std::pair<std::string, std::string>>& params() const { return params_; }
  std::optional<std::string> get(std::string_view key) const;
  bool has(std::string_view key) const { return get(key).has_value(); }
  // Sets or replaces a key, keeping its position when it exists.
  Descriptor& set(std::string_view key, std::string value);
  Descriptor& erase(std::string_view key);

  bool operator==(const Descriptor&) const = default;

 private:
  std::string kind_;
  std::vector<std::pair<std::string, std::string>> params_;
};

// Reads typed values out of a descriptor by its kind's key table (workloads/keys.h), which
// holds each key's default, choices and bounds, remembering which keys were used, so a workload
// can reject keys it does not know. Every error is a UsageError naming the descriptor; a key the
// table lacks, or asked for as the wrong type, is a std::logic_error (a bug in the workload).
class DescriptorReader {
 public:
  DescriptorReader(const Descriptor& descriptor, const WorkloadKind& kind)
      : descriptor_(descriptor), kind_(kind) {}
  // The value, else the table's default (or the value of the key it is the same as).
  std::int64_t integer(std::string_view key);
  double number(std::string_view key);
  std::string text(std::string_view key);
  std::string choice(std::string_view key);  // one of the table's choices
  // For a key whose default the workload works out (the table says how, in `derived`).
  std::int64_t integer_or(std::string_view key, std::int64_t derived);
  double number_or(std::string_view key, double derived);
  // Throws for any key no accessor asked for.
  void reject_unknown_keys() const;
  // The product of sizes read from the descriptor (with their element size), a UsageError
  // naming `what` ("op(A)'s bytes") where it would exceed 2^62: checked before any memory check
  // or allocation computes with it.
  std::int64_t checked_product(std::initializer_list<std::int64_t> factors,
                               std::string_view what) const;

 private:
  const KeySpec& spec(std::string_view key, KeyType type) const;
  std::optional<std::string> take(std::string_view key);
  std::int64_t checked_integer(const KeySpec& spec, const std::string& text) const;
  double checked_number(const KeySpec& spec, const std::string& text) const;
  [[noreturn]] void fail(std::string_view key, const std::string& value,
                         std::string_view expected) const;
  const Descriptor& descriptor_;
  const WorkloadKind& kind_;
  std::vector<std::string> used_;
};

// The workload kind of a descriptor line ("gemm" of "gemm m=4096 ..."), without parsing it.
inline std::string descriptor_kind(std::string_view line) {
  return std::string(line.substr(0, line.find(' ')));
}

// Sizes may be written with a binary suffix: 64Ki, 16Mi, 1Gi (or k/M/G for powers of ten);
// nullopt where the value with its suffix does not fit in 64 bits.
std::optional<std::int64_t> parse_integer(std::string_view text);

}  // namespace tb
