// The history database through the command line, where the machine is hostile: a read-only
// mount, a full disk, a report alike but for its results, a trend that matches nothing.
#include <nlohmann/json.hpp>

#include "tests/cli/cli_fixture.h"

namespace tb {
namespace {

std::string data(const std::string& name) {
  return std::string(TRAINBENCH_SOURCE_DIR) + "/tests/reports/data/" + name;
}

class HistoryFiles : public Cli {};

// Two runs in the same second, same command, machine and commit, in different folders: two
// reports. The same report again is named with the report it repeats.
TEST_F(HistoryFiles, RunsAlikeButForTheirResultsAreBothAdded) {
  nlohmann::json report = nlohmann::json::parse(slurp(data("baseline.json")));
  fs::create_directories(dir_ / "d1");
  fs::create_directories(dir_ / "d2");
  std::ofstream(dir_ / "d1/r.json") << report.dump();
  report["results"][0]["samples_s"][0] = report["results"][0]["samples_s"][0].get<double>() * 2;
  std::ofstream(dir_ / "d2/r.json") << report.dump();
  const Outcome both = run({"history", "--db", "h.db", "add", "d1/r.json", "d2/r.json"});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(both.out, "added d1/r.json\nadded d2/r.json\n");
  const Outcome again = run({"history", "--db", "h.db", "add", "d2/r.json"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("already there: d2/r.json (the report added from " +
                           (dir_ / "d2/r.json").string()),
            std::string::npos)
      << again.out;
}

TEST_F(HistoryFiles, AHistoryOnAReadOnlyMountIsRead) {
  if (!can_mount())
    GTEST_SKIP() << "cannot make a mount namespace here (needs root or user namespaces) for a "
                    "read-only mount";
  fs::create_directories(dir_ / "ro");
  ASSERT_EQ(run({"history", "--db", "ro/h.db", "add", data("baseline.json")}).exit_code, 0);
  const Outcome outcome = shell(
      "unshare -m sh -c 'mount --bind ro ro && mount -o remount,ro,bind ro && "
      "\"$tb\" history --db ro/h.db --format json list && "
      "\"$tb\" history --db ro/h.db trend --workload gemm && "
      "! \"$tb\" history --db ro/h.db add " +
      data("current_same.json") + "'");
  EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("\"cases\": 3"), std::string::npos) << outcome.out;
}

// A history the disk has no room for: the add fails saying so and leaves no file behind.
TEST_F(HistoryFiles, AFullDiskLeavesNoEmptyHistoryBehind) {
  if (!can_mount())
    GTEST_SKIP() << "cannot make a mount namespace here (needs root or user namespaces) for a "
                    "small file system that fills";
  const Outcome outcome = shell(
      "mkdir small && unshare -m sh -c 'mount -t tmpfs -o size=8k tmpfs small && "
      "\"$tb\" history --db small/h.db add " +
      data("baseline.json") + "; code=$?; ls -A small > left.txt; exit $code'");
  EXPECT_EQ(outcome.exit_code, 1) << outcome.err;
  EXPECT_NE(outcome.err.find("full"), std::string::npos) << outcome.err;
  EXPECT_EQ(slurp(dir_ / "left.txt"), "");
}

TEST_F(HistoryFiles, ATrendThatMatchesNothingIsBadInput) {
  ASSERT_EQ(run({"history", "--db", "h.db", "add", data("baseline.json")}).exit_code, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--workload", "no-such-workload"},
        std::vector<std::string>{"--workload", "gemm", "--machine", "no-such-machine"}}) {
    std::vector<std::string> command = {"history", "--db", "h.db", "trend"};
    command.insert(command.end(), args.begin(), args.end());
    const Outcome outcome = run(command);
    EXPECT_EQ(outcome.exit_code, 2) << outcome.err;
    EXPECT_NE(outcome.err.find("no passed case in h.db matches"), std::string::npos) << outcome.err;
  }
}

}  // namespace
}  // namespace tb
