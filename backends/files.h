// Writing a file so that a reader never sees half of it, and never over something that is not
// a report: what reports, baselines, pages and weight files share, whatever layer writes them.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace tb {

// A file that could not be read or written, with the path and the system's reason.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where a write to `path` lands, or FileError saying why nothing may be written there. A
// symbolic link is written through: the path of its final target. What is there may be
// replaced only if it is a regular file with a write permission bit set (for root too, who
// passes every permission check: a read-only report stays). A directory, a device, a pipe or
// a socket is refused, and so is a missing parent directory.
std::string output_path(const std::string& path);

// The temporary folder (TMPDIR where it names one, else /tmp): where a file that could not go
// where it was asked is kept instead.
std::string temporary_folder();
// The folder a command makes its temporary files in: TMPDIR where set, else /tmp. A TMPDIR
// that is empty, missing, not a folder or not writable is a FileError saying so.
std::string writable_temporary_folder();

// Removes a folder and everything in it when it goes out of scope, however the scope ends
// (nothing where the path is empty).
struct FolderRemover {
  std::filesystem::path folder;
  FolderRemover() = default;
  explicit FolderRemover(std::filesystem::path path) : folder(std::move(path)) {}
  FolderRemover(const FolderRemover&) = delete;
  FolderRemover& operator=(const FolderRemover&) = delete;
  ~FolderRemover() {
    std::error_code ignored;
    if (!folder.empty()) std::filesystem::remove_all(folder, ignored);
  }
};

// Writes `content` to a temporary file beside output_path(path), syncs it, then renames it
// over that path, keeping a replaced file's permissions. Throws FileError naming the path and
// the reason.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace tb
