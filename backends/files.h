// Writing a file so that a reader never sees half of it: what reports, baselines and weight
// files share, whatever layer writes them.
#pragma once

#include <stdexcept>
#include <string>

namespace tb {

// A file that could not be read or written, with the path and the system's reason.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes `content` to a temporary file beside `path`, syncs it, then renames it over `path`.
// Throws FileError naming the path and the system's reason.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace tb
