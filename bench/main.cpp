// trainbench: measures deep-learning training work on CPUs and GPUs through interchangeable
// backends and writes validated, versioned JSON reports.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "backends/status.h"
#include "bench/command_line.h"
#include "dist/world.h"

namespace {

// `text` with its control bytes escaped (\n, \x1b, ...): a descriptor or file name quoted in
// a message can neither split its line nor send the terminal an escape sequence.
std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (byte < 0x20 || byte == 0x7f)
      out += fmt::format("\\x{:02x}", byte);
    else
      out += c;
  }
  return out;
}

// One line and the exit code; across ranks the whole job ends with it (a rank that stopped
// alone would leave the others waiting for it).
int fail(tb::World* world, const char* what, int exit_code) {
  const std::string line = printable(what);
  if (world && world->size() > 1) world->abort(fmt::format("error: {}", line), exit_code);
  fmt::print(stderr, "trainbench: error: {}\n", line);
  return exit_code;
}

// Whether everything printed reached standard output: a full disk, /dev/full or a closed pipe
// is an error (one line on stderr, exit 1 where the command itself succeeded), never a silent
// empty file.
int with_output_checked(int exit_code) {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && std::cout && !std::ferror(stdout)) return exit_code;
  // A write that failed before the last flush left no errno behind: the usual causes, then.
  fmt::print(
      stderr, "trainbench: error: cannot write to standard output: {}\n",
      error ? std::strerror(error) : "a write failed (a full disk, or a reader that went away)");
  return exit_code == 0 ? 1 : exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // A reader that goes away (`trainbench run | head -1`) makes writes fail, which is checked,
  // rather than killing the run before its report is finished.
  signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<tb::World> world;
  try {
    // First: under a launcher MPI_Init may take arguments of its own.
    world = tb::make_world(&argc, &argv, tb::rank_timeout_from_environment());
    return with_output_checked(tb::run_command_line(argc, argv, *world));
  } catch (const tb::UsageError& e) {
    return fail(world.get(), e.what(), 2);
  } catch (const std::exception& e) {
    return fail(world.get(), e.what(), 1);
  }
}
