#include "backends/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tb {

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string temp = fmt::format("{}.tmp.{}", path, getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw FileError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      throw FileError(fmt::format("cannot write {}: {}", path, std::strerror(error)));
    }
    written += static_cast<std::size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int sync_error = errno;
  ::close(fd);
  if (!synced || ::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = synced ? errno : sync_error;
    ::unlink(temp.c_str());
    throw FileError(fmt::format("cannot write {}: {}", path, std::strerror(error)));
  }
}

}  // namespace tb
