// IDX files (the MNIST family's format), plain or gzip-compressed: a big-endian header (two
// zero bytes, a type code, the number of dimensions, each dimension) and unsigned bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/status.h"

namespace tb {

struct IdxArray {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> values;  // row-major
};

// Reads an unsigned-byte IDX file with `expected_dims` dimensions; a missing, truncated or
// malformed file is an error naming the file and what was wrong.
Status read_idx_file(const std::string& path, std::size_t expected_dims, IdxArray* out);

}  // namespace tb
