#include "backends/numbers.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace tb {

bool NumberRange::contains(double value) const {
  if (!std::isfinite(value)) return false;
  const bool above = min_excluded ? value > min : value >= min;
  const bool below = max_excluded ? value < max : value <= max;
  return above && below;
}

std::string NumberRange::words() const {
  const bool bounded_below = min != std::numeric_limits<double>::lowest();
  const bool bounded_above = max != std::numeric_limits<double>::max();
  if (bounded_below && bounded_above)
    return fmt::format("in {}{:g}, {:g}{}", min_excluded ? '(' : '[', min, max,
                       max_excluded ? ')' : ']');
  if (bounded_below) return fmt::format("{} {:g}", min_excluded ? ">" : ">=", min);
  if (bounded_above) return fmt::format("{} {:g}", max_excluded ? "<" : "<=", max);
  return "";
}

std::optional<double> parse_number(std::string_view text, NumberRange range) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end || !range.contains(value)) return std::nullopt;
  return value;
}

std::optional<std::int64_t> parse_whole_number(std::string_view text, std::int64_t min,
                                               std::int64_t max, bool suffixes) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop == text.data()) return std::nullopt;
  const std::string_view suffix(stop, static_cast<std::size_t>(end - stop));
  std::int64_t scale = 1;
  if (!suffix.empty()) {
    constexpr std::pair<std::string_view, std::int64_t> kScales[] = {{"Ki", std::int64_t{1} << 10},
                                                                     {"Mi", std::int64_t{1} << 20},
                                                                     {"Gi", std::int64_t{1} << 30},
                                                                     {"k", 1'000},
                                                                     {"M", 1'000'000},
                                                                     {"G", 1'000'000'000}};
    scale = 0;
    for (const auto& [name, factor] : kScales)
      if (suffixes && suffix == name) scale = factor;
    if (scale == 0) return std::nullopt;
  }
  std::int64_t scaled = 0;
  if (__builtin_mul_overflow(value, scale, &scaled) || scaled < min || scaled > max)
    return std::nullopt;
  return scaled;
}

std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t product = 1;
  for (std::int64_t factor : factors)
    if (factor < 0 || __builtin_mul_overflow(product, factor, &product) || product > kLargestSize)
      return std::nullopt;
  return product;
}

}  // namespace tb
