#include "models/weights_file.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/files.h"
#include "backends/numbers.h"

namespace tb {
namespace {

// A JSON array of whole numbers >= 0 (a shape, a pair of offsets); nullopt for anything else (a
// fraction, a negative or a number past 2^63 would not convert).
std::optional<std::vector<std::int64_t>> whole_numbers(const nlohmann::json& array) {
  if (!array.is_array()) return std::nullopt;
  std::vector<std::int64_t> values;
  for (const nlohmann::json& value : array) {
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() && value.get<std::uint64_t>() > INT64_MAX))
      return std::nullopt;
    values.push_back(value.get<std::int64_t>());
    if (values.back() < 0) return std::nullopt;
  }
  return values;
}

std::size_t element_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "I32") return 4;
  return 0;
}

double read_value(const char* at, const std::string& dtype) {
  if (dtype == "F32") {
    float v;
    std::memcpy(&v, at, 4);
    return v;
  }
  if (dtype == "F64") {
    double v;
    std::memcpy(&v, at, 8);
    return v;
  }
  if (dtype == "I32") {
    std::int32_t v;
    std::memcpy(&v, at, 4);
    return v;
  }
  std::int64_t v;
  std::memcpy(&v, at, 8);
  return static_cast<double>(v);
}

}  // namespace

Status save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        DType dtype) {
  if (dtype != DType::f32 && dtype != DType::f64)
    return Status::InvalidArgument("safetensors files hold f32 or f64 values here");
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const NamedTensor& tensor : tensors) {
    const std::string type = tensor.integer ? "I64" : dtype == DType::f64 ? "F64" : "F32";
    const std::size_t begin = data.size();
    for (double value : tensor.values) {
      char bytes[8];
      if (type == "I64") {
        const auto v = static_cast<std::int64_t>(value);
        std::memcpy(bytes, &v, 8);
      } else if (type == "F64") {
        std::memcpy(bytes, &value, 8);
      } else {
        const auto v = static_cast<float>(value);
        std::memcpy(bytes, &v, 4);
      }
      data.append(bytes, element_size(type));
    }
    header[tensor.name] = {
        {"dtype", type}, {"shape", tensor.dims}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  const std::uint64_t length = text.size();
  std::string file(8, '\0');
  std::memcpy(file.data(), &length, 8);
  try {
    write_file_atomically(path, file + text + data);
  } catch (const FileError& e) {
    return Status::Failed(e.what());
  }
  return Status::Ok();
}

Status load_safetensors(const std::string& path, std::vector<NamedTensor>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(fmt::format("cannot open '{}'", path));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto corrupt = [&](const std::string& why) {
    return Status::InvalidArgument(
        fmt::format("'{}' is not a valid safetensors file: {}", path, why));
  };
  if (bytes.size() < 8) return corrupt("shorter than its 8-byte header length");
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  if (length > bytes.size() - 8) return corrupt("header length runs past the end");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, length));
  } catch (const nlohmann::json::exception& e) {
    return corrupt(std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object()) return corrupt("header is not a JSON object");
  const std::size_t data_start = 8 + length, data_size = bytes.size() - data_start;
  out->clear();
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      const std::string dtype = entry.at("dtype").get<std::string>();
      const auto dims = whole_numbers(entry.at("shape"));
      const auto offsets = whole_numbers(entry.at("data_offsets"));
      const std::size_t size = element_size(dtype);
      if (size == 0)
        return corrupt(fmt::format("tensor '{}' has unsupported dtype {}", name, dtype));
      if (!dims || !offsets)
        return corrupt(
            fmt::format("tensor '{}': its shape and offsets must be whole numbers", name));
      // The element count in checked arithmetic: a shape whose product wraps must not match
      // the offsets by chance and size an allocation.
      std::optional<std::int64_t> elements = 1;
      for (std::int64_t dim : *dims)
        if (elements) elements = checked_product({*elements, dim});
      const auto bytes_wanted =
          elements ? checked_product({*elements, static_cast<std::int64_t>(size)}) : std::nullopt;
      const auto count = static_cast<std::size_t>(elements.value_or(0));
      if (!bytes_wanted || offsets->size() != 2 || (*offsets)[1] < (*offsets)[0] ||
          static_cast<std::size_t>((*offsets)[1]) > data_size ||
          (*offsets)[1] - (*offsets)[0] != *bytes_wanted)
        return corrupt(fmt::format("tensor '{}' has offsets that do not match its shape", name));
      NamedTensor tensor{name, *dims, std::vector<double>(count), dtype[0] == 'I'};
      for (std::size_t i = 0; i < count; ++i)
        tensor.values[i] = read_value(bytes.data() + data_start + (*offsets)[0] + i * size, dtype);
      out->push_back(std::move(tensor));
    } catch (const nlohmann::json::exception& e) {
      return corrupt(fmt::format("entry '{}': {}", name, e.what()));
    }
  }
  return Status::Ok();
}

}  // namespace tb
