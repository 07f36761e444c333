// The command line: the fuzzed bytes split at newlines into arguments, parsed and checked as
// `trainbench` would before it starts anything (CommandLineMode::check_only: no case runs, no
// file is read or written). Bad options may only ever be a UsageError.
#include <string>
#include <vector>

#include "backends/status.h"
#include "bench/command_line.h"
#include "dist/world.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto world = tb::make_single_process_world();
  std::vector<std::string> args = {"trainbench"};
  const std::string text = tb::fuzzing::text(data, size);
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    args.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  try {
    tb::run_command_line(static_cast<int>(argv.size()), argv.data(), *world,
                         tb::CommandLineMode::check_only);
  } catch (const tb::UsageError&) {
  }
  return 0;
}
