// History databases: the fuzzed bytes as a history file (seeds: a real history, a history of the
// first schema, another program's database), read and added to through the command line as a
// user runs it. A damaged or foreign file is bad input: a UsageError (exit 2), never a crash, a
// hang or another exception; a foreign file is left as it was.
#include <string>

#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto world = tb::make_single_process_world();
  const auto dir = tb::fuzzing::scratch_directory();
  const std::string db =
      tb::fuzzing::scratch_file(dir, "history.db", tb::fuzzing::text(data, size));
  const std::string known = std::string(TRAINBENCH_TEST_DATA) + "/baseline.json";
  tb::fuzzing::run_command(*world, {"history", "--db", db, "list"});
  tb::fuzzing::run_command(
      *world, {"history", "--db", db, "--format", "json", "trend", "--workload", "gemm"});
  tb::fuzzing::run_command(*world, {"check", "--baseline-history", db, "--current", known});
  tb::fuzzing::run_command(*world,
                           {"report", "--html", (dir / "page.html").string(), "--history", db});
  tb::fuzzing::run_command(*world, {"history", "--db", db, "add", known});
  tb::fuzzing::run_command(*world, {"history", "--db", db, "list"});
  return 0;
}
