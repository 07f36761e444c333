// Reports: the fuzzed bytes as a report file, read by every command that reads reports
// (summary, compare and check against itself and a real report, report --html, history add),
// each through the command line as a user runs it. Exit 0, 1 (a regression) or a UsageError
// (exit 2) are the only outcomes allowed.
#include <string>
#include <vector>

#include "backends/status.h"
#include "bench/command_line.h"
#include "dist/world.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

void run(tb::World& world, std::vector<std::string> args) {
  args.insert(args.begin(), "trainbench");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  try {
    tb::run_command_line(static_cast<int>(argv.size()), argv.data(), world);
  } catch (const tb::UsageError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto world = tb::make_single_process_world();
  const auto dir = tb::fuzzing::scratch_directory();
  const std::string report =
      tb::fuzzing::scratch_file(dir, "report.json", tb::fuzzing::text(data, size));
  const std::string known = std::string(TRAINBENCH_TEST_DATA) + "/baseline.json";
  run(*world, {"summary", report});
  run(*world, {"summary", "--format", "json", report});
  run(*world, {"compare", known, report, "--format", "json"});
  run(*world, {"compare", report, report, "--across-backends"});
  run(*world, {"check", "--baseline", known, "--current", report});
  run(*world, {"check", "--baseline", report, report, report, "--current", report});
  run(*world, {"report", "--html", (dir / "page.html").string(), report, known});
  run(*world, {"history", "--db", (dir / "history.db").string(), "add", report});
  run(*world, {"history", "--db", (dir / "history.db").string(), "trend", "--workload", "gemm"});
  return 0;
}
