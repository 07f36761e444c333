#include "data/idx_file.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tb {
namespace {

constexpr std::uint8_t kUnsignedByte = 0x08;
// Far above any dataset read here (Fashion-MNIST's training images: 47 million bytes).
constexpr std::size_t kLargestIdxValues = std::size_t{1} << 32;
constexpr std::size_t kReadChunk = std::size_t{1} << 24;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};

// Reads exactly `bytes` bytes (gzread transparently reads uncompressed files too).
bool read_exactly(gzFile file, void* out, std::size_t bytes) {
  auto* cursor = static_cast<char*>(out);
  while (bytes > 0) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(bytes, 1u << 30));
    const int got = gzread(file, cursor, chunk);
    if (got <= 0) return false;
    cursor += got;
    bytes -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace

Status read_idx_file(const std::string& path, std::size_t expected_dims, IdxArray* out) {
  if (!std::filesystem::exists(path))
    return Status::InvalidArgument(fmt::format("{}: no such file", path));
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) return Status::InvalidArgument(fmt::format("{}: cannot open", path));
  std::uint8_t magic[4];
  if (!read_exactly(file.get(), magic, sizeof(magic)))
    return Status::InvalidArgument(fmt::format("{}: shorter than an IDX header", path));
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != kUnsignedByte || magic[3] != expected_dims)
    return Status::InvalidArgument(
        fmt::format("{}: not an unsigned-byte IDX file of {} dimensions (magic {:02x} {:02x} "
                    "{:02x} {:02x})",
                    path, expected_dims, magic[0], magic[1], magic[2], magic[3]));
  out->dims.clear();
  std::size_t count = 1;
  for (std::size_t d = 0; d < expected_dims; ++d) {
    std::uint8_t size[4];
    if (!read_exactly(file.get(), size, sizeof(size)))
      return Status::InvalidArgument(fmt::format("{}: truncated header", path));
    const std::int64_t dim =
        (std::int64_t{size[0]} << 24) | (size[1] << 16) | (size[2] << 8) | size[3];
    if (dim <= 0 || dim > (1 << 28))
      return Status::InvalidArgument(fmt::format("{}: dimension {} is {}", path, d, dim));
    out->dims.push_back(dim);
    count *= static_cast<std::size_t>(dim);  // at most 2^32 x 2^28 here: no wrap
    // The header is checked before it sizes an allocation.
    if (count > kLargestIdxValues)
      return Status::InvalidArgument(
          fmt::format("{}: the header declares more than {} values (dimensions {})", path,
                      kLargestIdxValues, fmt::join(out->dims, " x ")));
  }
  // Grown as the data arrives, so that memory follows what the file holds, not what its header
  // claims.
  out->values.clear();
  while (out->values.size() < count) {
    const std::size_t have = out->values.size(), chunk = std::min(count - have, kReadChunk);
    out->values.resize(have + chunk);
    if (!read_exactly(file.get(), out->values.data() + have, chunk))
      return Status::InvalidArgument(
          fmt::format("{}: truncated: the header promises {} values", path, count));
  }
  std::uint8_t extra;
  if (gzread(file.get(), &extra, 1) != 0)
    return Status::InvalidArgument(
        fmt::format("{}: data beyond the {} values the header declares", path, count));
  return Status::Ok();
}

}  // namespace tb
