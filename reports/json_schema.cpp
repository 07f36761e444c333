#include "reports/json_schema.h"

#include <fmt/format.h>

namespace tb {
namespace {

bool has_type(const nlohmann::json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") return value.is_number_integer();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

class Validator {
 public:
  explicit Validator(const nlohmann::json& root) : root_(root) {}

  void check(const nlohmann::json& schema, const nlohmann::json& value, const std::string& path) {
    if (schema.contains("$ref")) {
      const std::string ref = schema["$ref"];
      const std::string prefix = "#/$defs/";
      if (ref.rfind(prefix, 0) != 0 || !root_["$defs"].contains(ref.substr(prefix.size()))) {
        errors_.push_back(fmt::format("{}: unresolvable $ref {}", path, ref));
        return;
      }
      check(root_["$defs"][ref.substr(prefix.size())], value, path);
      return;
    }
    if (schema.contains("type")) {
      const auto& type = schema["type"];
      bool matches = false;
      if (type.is_string())
        matches = has_type(value, type);
      else
        for (const auto& option : type) matches = matches || has_type(value, option);
      if (!matches) {
        errors_.push_back(
            fmt::format("{}: expected {}, found {}", path, type.dump(), value.type_name()));
        return;
      }
    }
    if (schema.contains("enum")) {
      bool found = false;
      for (const auto& option : schema["enum"]) found = found || option == value;
      if (!found)
        errors_.push_back(
            fmt::format("{}: {} is not one of {}", path, value.dump(), schema["enum"].dump()));
    }
    if (schema.contains("minimum") && value.is_number() &&
        value.get<double>() < schema["minimum"].get<double>())
      errors_.push_back(fmt::format("{}: {} is below the minimum {}", path, value.dump(),
                                    schema["minimum"].dump()));
    if (value.is_object()) check_object(schema, value, path);
    if (value.is_array() && schema.contains("items"))
      for (std::size_t i = 0; i < value.size(); ++i)
        check(schema["items"], value[i], fmt::format("{}[{}]", path, i));
  }

  std::vector<std::string> errors() && { return std::move(errors_); }

 private:
  void check_object(const nlohmann::json& schema, const nlohmann::json& value,
                    const std::string& path) {
    if (schema.contains("required"))
      for (const auto& key : schema["required"])
        if (!value.contains(key.get<std::string>()))
          errors_.push_back(
              fmt::format("{}: missing required key '{}'", path, key.get<std::string>()));
    const nlohmann::json properties = schema.value("properties", nlohmann::json::object());
    for (const auto& [key, item] : value.items()) {
      const std::string item_path = path + "." + key;
      if (properties.contains(key)) {
        check(properties[key], item, item_path);
      } else if (schema.contains("additionalProperties")) {
        const auto& additional = schema["additionalProperties"];
        if (additional.is_boolean()) {
          if (!additional.get<bool>())
            errors_.push_back(fmt::format("{}: unexpected key", item_path));
        } else {
          check(additional, item, item_path);
        }
      }
    }
  }

  const nlohmann::json& root_;
  std::vector<std::string> errors_;
};

}  // namespace

std::vector<std::string> validate_against_schema(const nlohmann::json& schema,
                                                 const nlohmann::json& document) {
  Validator validator(schema);
  validator.check(schema, document, "$");
  return std::move(validator).errors();
}

}  // namespace tb
