// What the fuzz harnesses share: the fuzzed bytes as text or as a file, and the rule that bad
// input may only ever be refused with a UsageError (or a Status): any other exception escapes
// the harness, and libFuzzer reports it as a crash with the input that caused it.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/status.h"
#include "bench/command_line.h"
#include "dist/world.h"

namespace tb::fuzzing {

inline std::string text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A directory of this process's own, emptied for each input.
inline std::filesystem::path scratch_directory() {
  static const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("trainbench-fuzz-{}", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes `bytes` to `name` in the scratch directory and returns its path.
inline std::string scratch_file(const std::filesystem::path& dir, const std::string& name,
                                const std::string& bytes) {
  const std::filesystem::path path = dir / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

// Runs `trainbench ARGS...` as a user would; a UsageError (exit 2) is the one refusal allowed.
inline void run_command(World& world, std::vector<std::string> args) {
  args.insert(args.begin(), "trainbench");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  try {
    run_command_line(static_cast<int>(argv.size()), argv.data(), world);
  } catch (const UsageError&) {
  }
}

}  // namespace tb::fuzzing
