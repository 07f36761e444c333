#include "workloads/descriptor.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "backends/numbers.h"
#include "backends/status.h"

namespace tb {
namespace {

bool valid_character(unsigned char c) {
  return std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == ',' || c == '+' || c == ':';
}

bool valid_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), valid_character);
}

// Why a key or value is refused: its first character that no key or value may hold.
std::string invalid_character(std::string_view text) {
  const auto bad = std::find_if_not(text.begin(), text.end(), valid_character);
  if (bad == text.end()) return "";
  const auto c = static_cast<unsigned char>(*bad);
  const std::string what = c >= 0x80         ? fmt::format("the byte 0x{:02x} (not ASCII)", c)
                           : std::isprint(c) ? fmt::format("'{}'", static_cast<char>(c))
                                             : fmt::format("the control byte 0x{:02x}", c);
  return fmt::format(
      "{} is not allowed (keys and values hold letters, digits and _ - . , + : only)", what);
}

}  // namespace

Descriptor Descriptor::parse(std::string_view line) {
  std::istringstream words{std::string(line)};
  std::string word;
  if (!(words >> word)) throw UsageError("empty workload descriptor");
  if (word.find('=') != std::string::npos || !valid_token(word))
    throw UsageError(fmt::format("workload descriptor '{}' must start with a workload name", line));
  Descriptor descriptor(word);
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == word.size())
      throw UsageError(
          fmt::format("malformed token '{}' in '{}' (expected key=value)", word, line));
    std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    if (!valid_token(key) || !valid_token(value))
      throw UsageError(
          fmt::format("malformed token '{}' in '{}': {}{}", word, line,
                      invalid_character(valid_token(key) ? value : key),
                      key == "shapes" ? "; shapes= takes a list's name, not a path" : ""));
    if (descriptor.has(key))
      throw UsageError(fmt::format("key '{}' given twice in '{}'", key, line));
    descriptor.params_.emplace_back(std::move(key), std::move(value));
  }
  return descriptor;
}

std::string Descriptor::to_string() const {
  std::string text = kind_;
  for (const auto& [key, value] : params_) text += fmt::format(" {}={}", key, value);
  return text;
}

std::optional<std::string> Descriptor::get(std::string_view key) const {
  for (const auto& [name, value] : params_)
    if (name == key) return value;
  return std::nullopt;
}

Descriptor& Descriptor::set(std::string_view key, std::string value) {
  for (auto& [name, existing] : params_)
    if (name == key) {
      existing = std::move(value);
      return *this;
    }
  params_.emplace_back(std::string(key), std::move(value));
  return *this;
}

Descriptor& Descriptor::erase(std::string_view key) {
  std::erase_if(params_, [&](const auto& param) { return param.first == key; });
  return *this;
}

std::optional<std::int64_t> parse_integer(std::string_view text) {
  return parse_whole_number(text, std::numeric_limits<std::int64_t>::min(),
                            std::numeric_limits<std::int64_t>::max(), /*suffixes=*/true);
}

const KeySpec& DescriptorReader::spec(std::string_view key, KeyType type) const {
  const KeySpec& spec = kind_.at(key);
  if (spec.type != type)
    throw std::logic_error(fmt::format(
        "workload '{}' reads key '{}' as another type than its table's", kind_.name, key));
  return spec;
}

std::optional<std::string> DescriptorReader::take(std::string_view key) {
  used_.emplace_back(key);
  return descriptor_.get(key);
}

void DescriptorReader::fail(std::string_view key, const std::string& value,
                            std::string_view expected) const {
  throw UsageError(fmt::format("bad value '{}' for '{}' in '{}': expected {}", value, key,
                               descriptor_.to_string(), expected));
}

std::int64_t DescriptorReader::checked_integer(const KeySpec& spec, const std::string& text) const {
  const auto value = parse_whole_number(text, spec.min, spec.max, /*suffixes=*/true);
  if (!value)
    fail(spec.name, text,
         spec.max == std::numeric_limits<std::int64_t>::max()
             ? fmt::format("an integer >= {}", spec.min)
             : fmt::format("an integer from {} to {}", spec.min, spec.max));
  return *value;
}

double DescriptorReader::checked_number(const KeySpec& spec, const std::string& text) const {
  const auto value = parse_number(text, spec.range);
  if (!value) {
    const std::string range = spec.range.words();
    fail(spec.name, text, range.empty() ? "a finite number" : "a finite number " + range);
  }
  return *value;
}

std::int64_t DescriptorReader::checked_product(std::initializer_list<std::int64_t> factors,
                                               std::string_view what) const {
  const auto product = tb::checked_product(factors);
  if (!product)
    throw UsageError(
        fmt::format("'{}' is too large: {} would exceed 2^62", descriptor_.to_string(), what));
  return *product;
}

std::int64_t DescriptorReader::integer(std::string_view key) {
  const KeySpec& spec = this->spec(key, KeyType::integer);
  if (const auto text = take(key)) return checked_integer(spec, *text);
  if (spec.required)
    throw UsageError(fmt::format("'{}' needs {}=<integer>", descriptor_.to_string(), key));
  if (!spec.same_as.empty()) return integer(spec.same_as);
  return checked_integer(spec, spec.fallback);
}

std::int64_t DescriptorReader::integer_or(std::string_view key, std::int64_t derived) {
  const KeySpec& spec = this->spec(key, KeyType::integer);
  const auto text = take(key);
  return text ? checked_integer(spec, *text) : derived;
}

double DescriptorReader::number(std::string_view key) {
  const KeySpec& spec = this->spec(key, KeyType::number);
  return checked_number(spec, take(key).value_or(spec.fallback));
}

double DescriptorReader::number_or(std::string_view key, double derived) {
  const KeySpec& spec = this->spec(key, KeyType::number);
  const auto text = take(key);
  return text ? checked_number(spec, *text) : derived;
}

std::string DescriptorReader::text(std::string_view key) {
  return take(key).value_or(kind_.at(key).fallback);
}

std::string DescriptorReader::choice(std::string_view key) {
  const KeySpec& spec = this->spec(key, KeyType::choice);
  std::string value = take(key).value_or(spec.fallback);
  if (std::find(spec.choices.begin(), spec.choices.end(), value) == spec.choices.end())
    fail(key, value, fmt::format("one of {}", fmt::join(spec.choices, ", ")));
  return value;
}

void DescriptorReader::reject_unknown_keys() const {
  for (const auto& [key, value] : descriptor_.params())
    if (std::find(used_.begin(), used_.end(), key) == used_.end())
      throw UsageError(fmt::format("unknown key '{}' in '{}'", key, descriptor_.to_string()));
}

}  // namespace tb
