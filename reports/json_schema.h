// A small JSON Schema validator for the subset reports/schema.json uses: type, required,
// properties, additionalProperties, items, enum, minimum and local $ref ("#/$defs/NAME").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb {

// Every violation, as "path: what is wrong"; empty when the document conforms.
std::vector<std::string> validate_against_schema(const nlohmann::json& schema,
                                                 const nlohmann::json& document);

}  // namespace tb
