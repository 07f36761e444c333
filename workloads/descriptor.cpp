#include "workloads/descriptor.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "backends/status.h"

namespace tb {
namespace {

bool valid_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == ',' || c == '+' || c == ':';
  });
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
      throw UsageError(fmt::format("malformed token '{}' in '{}'", word, line));
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
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr == text.data()) return std::nullopt;
  const std::string_view suffix(ptr, end - ptr);
  std::int64_t scale = 1;
  if (suffix.empty())
    scale = 1;
  else if (suffix == "Ki")
    scale = std::int64_t{1} << 10;
  else if (suffix == "Mi")
    scale = std::int64_t{1} << 20;
  else if (suffix == "Gi")
    scale = std::int64_t{1} << 30;
  else if (suffix == "k")
    scale = 1'000;
  else if (suffix == "M")
    scale = 1'000'000;
  else if (suffix == "G")
    scale = 1'000'000'000;
  else
    return std::nullopt;
  if (value != 0 && (value > INT64_MAX / scale || value < INT64_MIN / scale)) return std::nullopt;
  return value * scale;
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
  const auto value = parse_integer(text);
  if (!value || *value < spec.min) fail(spec.name, text, fmt::format("an integer >= {}", spec.min));
  return *value;
}

double DescriptorReader::checked_number(const KeySpec& spec, const std::string& text) const {
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) fail(spec.name, text, "a number");
  return value;
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
