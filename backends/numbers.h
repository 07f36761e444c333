// The one parsing layer for numbers that come from outside: a descriptor, an option, an
// environment variable. Each reads the whole text, is finite and lies within its range, and sizes
// are multiplied in checked arithmetic, so that no later byte count, FLOP count or loop bound
// computed from them can wrap.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace tb {

// A closed range [min, max] of a number read from text.
struct NumberRange {
  double min = std::numeric_limits<double>::lowest();
  double max = std::numeric_limits<double>::max();
  bool min_excluded = false;  // (min, max]: a learning rate above 0
  bool max_excluded = false;  // [min, max): a dropout probability below 1

  bool contains(double value) const;
  std::string words() const;  // "in [0, 1)", "> 0", "" for every finite number
};

// The whole text as a finite number within `range`; nullopt for anything else ("nan", "inf",
// "1e999", "2x", "").
std::optional<double> parse_number(std::string_view text, NumberRange range = {});

// The whole text as an integer in [min, max], optionally with a size suffix (Ki, Mi, Gi: powers
// of 1024; k, M, G: of 1000) whose product must fit too; nullopt for anything else.
std::optional<std::int64_t> parse_whole_number(
    std::string_view text, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
    std::int64_t max = std::numeric_limits<std::int64_t>::max(), bool suffixes = false);

// The largest size (a count of elements, bytes or FLOPs) trainbench computes with: 2^62, so that
// a few additions and a factor of 2 or 3 on a checked product still fit in 64 bits.
inline constexpr std::int64_t kLargestSize = std::int64_t{1} << 62;

// The product of non-negative factors, nullopt where it exceeds kLargestSize (or a factor is
// negative).
std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors);

}  // namespace tb
