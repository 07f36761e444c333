#include "backends/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace tb {
namespace {

namespace fs = std::filesystem;

// The kind of a non-regular file, as a refusal names it.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// A symbolic link's final target; `path` itself when it is none.
fs::path follow_links(const std::string& path) {
  constexpr int kMaxLinks = 40;  // as the kernel's own limit on a path's links
  fs::path at(path);
  for (int hops = 0; hops < kMaxLinks; ++hops) {
    std::error_code error;
    if (!fs::is_symlink(fs::symlink_status(at, error))) return at;
    const fs::path target = fs::read_symlink(at, error);
    if (error) throw FileError(fmt::format("cannot write {}: {}", path, error.message()));
    at = target.is_absolute() ? target : at.parent_path() / target;
  }
  throw FileError(fmt::format("cannot write {}: too many levels of symbolic links", path));
}

}  // namespace

std::string output_path(const std::string& path) {
  if (path.empty()) throw FileError("cannot write an empty path");
  const fs::path target = follow_links(path);
  const std::string via =
      target == fs::path(path) ? "" : fmt::format(" (a symbolic link to {})", target.string());
  struct stat info {};
  if (::stat(target.c_str(), &info) == 0) {
    if (!S_ISREG(info.st_mode))
      throw FileError(fmt::format("will not write {}{}: it is {}, not a report file", path, via,
                                  file_kind(info.st_mode)));
    if ((info.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0 || ::access(target.c_str(), W_OK) != 0)
      throw FileError(fmt::format("will not write {}{}: the file is read-only", path, via));
    return target.string();
  }
  if (errno != ENOENT)
    throw FileError(fmt::format("cannot write {}{}: {}", path, via, std::strerror(errno)));
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  if (::stat(parent.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    throw FileError(fmt::format("cannot write {}{}: no directory {}", path, via, parent.string()));
  return target.string();
}

std::string temporary_folder() {
  std::error_code none;
  const fs::path folder = fs::temp_directory_path(none);
  return none ? "/tmp" : folder.string();
}

std::string writable_temporary_folder() {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string folder = tmpdir ? tmpdir : "/tmp";
  const std::string named = tmpdir ? fmt::format("TMPDIR='{}'", folder) : "/tmp";
  struct stat info {};
  if (folder.empty())
    throw FileError("TMPDIR is set but empty: unset it or name a writable folder");
  if (::stat(folder.c_str(), &info) != 0)
    throw FileError(
        fmt::format("{} cannot be used for temporary files: {}", named, std::strerror(errno)));
  if (!S_ISDIR(info.st_mode))
    throw FileError(fmt::format("{} is not a folder: temporary files need one", named));
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw FileError(fmt::format("{} cannot be written ({}): temporary files need a writable folder",
                                named, std::strerror(errno)));
  return folder;
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string target = output_path(path);
  struct stat existing {};
  const bool replaces = ::stat(target.c_str(), &existing) == 0;
  // Beside the target, under a short name of its own: a name of the file system's longest
  // (255 bytes) stays writable, as a suffix on the target's name would not.
  const std::string temp =
      (std::filesystem::path(target).parent_path() / fmt::format(".trainbench-{}.tmp", getpid()))
          .string();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw FileError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  auto fail = [&](int error) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw FileError(fmt::format("cannot write {}: {}", path, std::strerror(error)));
  };
  if (replaces && ::fchmod(fd, existing.st_mode & 07777) != 0) fail(errno);
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(n < 0 ? errno : EIO);
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail(errno);
  ::close(fd);
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw FileError(fmt::format("cannot write {}: {}", path, std::strerror(error)));
  }
}

}  // namespace tb
