// Reports: the fuzzed bytes as a report file, read by every command that reads reports
// (summary, compare and check against itself and a real report, report --html, history add),
// each through the command line as a user runs it. Exit 0, 1 (a regression) or a UsageError
// (exit 2) are the only outcomes allowed.
#include <string>

#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto world = tb::make_single_process_world();
  const auto dir = tb::fuzzing::scratch_directory();
  const std::string report =
      tb::fuzzing::scratch_file(dir, "report.json", tb::fuzzing::text(data, size));
  const std::string known = std::string(TRAINBENCH_TEST_DATA) + "/baseline.json";
  tb::fuzzing::run_command(*world, {"summary", report});
  tb::fuzzing::run_command(*world, {"summary", "--format", "json", report});
  tb::fuzzing::run_command(*world, {"compare", known, report, "--format", "json"});
  tb::fuzzing::run_command(*world, {"compare", report, report, "--across-backends"});
  tb::fuzzing::run_command(*world, {"check", "--baseline", known, "--current", report});
  tb::fuzzing::run_command(*world,
                           {"check", "--baseline", report, report, report, "--current", report});
  tb::fuzzing::run_command(*world,
                           {"report", "--html", (dir / "page.html").string(), report, known});
  tb::fuzzing::run_command(*world,
                           {"history", "--db", (dir / "history.db").string(), "add", report});
  tb::fuzzing::run_command(
      *world, {"history", "--db", (dir / "history.db").string(), "trend", "--workload", "gemm"});
  return 0;
}
