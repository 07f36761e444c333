// What a run or a report command leaves when it is interrupted or cannot write: an interrupt
// never destroys the report it was to replace and says where the finished cases are, a full
// disk keeps every finished case in a named fallback file, and a write error on standard output
// (a full disk, a reader gone) is an error, never a silent empty file or a lost report.
#include <signal.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_fixture.h"

namespace tb {
namespace {

std::string data(const std::string& name) {
  return std::string(TRAINBENCH_SOURCE_DIR) + "/tests/reports/data/" + name;
}

std::size_t results_in(const fs::path& report) {
  return nlohmann::json::parse(slurp(report))["results"].size();
}

class OutputSafety : public Cli {
 protected:
  // Waits until the run's stderr says it started case `number`; false after a minute.
  bool wait_for_case(int number) const {
    const std::string started = fmt::format("[{}/", number);
    for (int tick = 0; tick < 600; ++tick) {
      if (slurp(dir_ / "stderr").find(started) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
};

// A case that runs for a minute whatever the harness settings: an interrupt finds it running.
const std::string kLongCase = "ttt-fashion-mnist target=0.99 subset=4096 epochs=20";

TEST_F(OutputSafety, AnInterruptBeforeAnyCaseFinishedLeavesTheOldReportAsItWas) {
  fs::copy_file(data("baseline.json"), report_path());
  const std::string before = slurp(report_path());
  const pid_t pid = spawn({"run", "-b", "cpu-onednn", "-w", kLongCase, "-o", report_path()});
  ASSERT_TRUE(wait_for_case(1)) << slurp(dir_ / "stderr");
  kill(pid, SIGINT);
  const Outcome outcome = wait_for(pid);
  EXPECT_EQ(outcome.exit_code, 128 + SIGINT) << outcome.err;
  EXPECT_EQ(slurp(report_path()), before);
  EXPECT_NE(outcome.err.find("ended by SIGINT"), std::string::npos) << outcome.err;
  // Where the time went when the limit came: the case and its stage.
  EXPECT_NE(outcome.err.find("during case 1 of 1 (ttt-fashion-mnist"), std::string::npos)
      << outcome.err;
  EXPECT_NE(outcome.err.find(" s into its "), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("no case had finished, so " + report_path() + " was not written"),
            std::string::npos)
      << outcome.err;
}

TEST_F(OutputSafety, AnInterruptKeepsTheCasesFinishedBeforeIt) {
  fs::copy_file(data("baseline.json"), report_path());
  std::vector<std::string> args = {"run", "-b",      "cpu-onednn", "-w",         "gemm m=64",
                                   "-w",  kLongCase, "-o",         report_path()};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  const pid_t pid = spawn(args);
  ASSERT_TRUE(wait_for_case(2)) << slurp(dir_ / "stderr");
  kill(pid, SIGINT);
  const Outcome outcome = wait_for(pid);
  EXPECT_EQ(outcome.exit_code, 128 + SIGINT) << outcome.err;
  const nlohmann::json report = nlohmann::json::parse(slurp(report_path()));
  ASSERT_EQ(report["results"].size(), 1u);
  EXPECT_EQ(report["results"][0]["status"], "passed");
  EXPECT_TRUE(report["finished_at"].is_null());  // an interrupted run says so
  EXPECT_NE(outcome.err.find("the 1 case finished before it is in " + report_path()),
            std::string::npos)
      << outcome.err;
}

// Standard output on a full device: every report command fails with one line, not exit 0 and
// an empty file.
TEST_F(OutputSafety, AWriteErrorOnStandardOutputIsAnError) {
  fs::copy_file(data("baseline.json"), dir_ / "a.json");
  fs::copy_file(data("current_regressed.json"), dir_ / "b.json");
  ASSERT_EQ(run({"history", "--db", "h.db", "add", "a.json"}).exit_code, 0);
  for (const std::string command :
       {"list", "info", "compare a.json b.json", "summary a.json",
        "check --baseline a.json "
        "--current b.json",
        "history --db h.db list", "compare a.json b.json --format json"}) {
    const Outcome outcome = shell("\"$tb\" " + command + " > /dev/full");
    EXPECT_NE(outcome.exit_code, 0) << command;
    EXPECT_NE(outcome.err.find("cannot write to"), std::string::npos)
        << command << ": " << outcome.err;
    EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1)
        << command << ": " << outcome.err;
  }
}

// `trainbench run | true`: the reader is gone before the table's first line. The run still
// runs every case and finishes its report, then says that its output was lost.
TEST_F(OutputSafety, ARunWhoseReaderLeftFinishesItsReport) {
  const Outcome outcome = shell(
      "set -o pipefail; \"$tb\" run -b cpu-onednn -w 'gemm m=64' -w 'gemm m=96' --time-budget "
      "0.02 --min-reps 2 -o " +
      report_path() + " | true");
  EXPECT_EQ(outcome.exit_code, 1) << outcome.err;
  const nlohmann::json report = nlohmann::json::parse(slurp(report_path()));
  EXPECT_EQ(report["results"].size(), 2u);
  EXPECT_FALSE(report["finished_at"].is_null());
  EXPECT_NE(outcome.err.find("cannot write to standard output"), std::string::npos) << outcome.err;
}

// A report on a file system that fills after its first case (a small tmpfs in a mount
// namespace of its own): the later cases still run, the fallback file the run names holds all
// of them and the finished run, and the report file keeps the case it could hold.
TEST_F(OutputSafety, AFullDiskKeepsEveryFinishedCaseInANamedFallback) {
  if (!can_mount())
    GTEST_SKIP() << "cannot make a mount namespace here (needs root or user namespaces) for a "
                    "small file system that fills";
  const std::string cases = "-w \"gemm m=64\" -w \"gemm m=80\" -w \"gemm m=96\"";
  // A fixed number of samples: each write of the report has a size known from another run.
  const std::string settings = "-b cpu-onednn --time-budget 0 --min-reps 3 --max-reps 3";
  const Outcome whole = shell("\"$tb\" run " + settings + " " + cases + " -o whole.json");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  // The run's first write: its report with the first case (numbers may differ by a few bytes).
  nlohmann::json first = nlohmann::json::parse(slurp(dir_ / "whole.json"));
  first["results"] = nlohmann::json::array({first["results"][0]});
  first["finished_at"] = nullptr;
  const std::size_t first_bytes = first.dump(2).size() + 1 + 1024;
  // Room for that and one page more, not for it and the next, longer, report beside it (each
  // write goes to a new file renamed over the old).
  const std::size_t page = 4096, room = (first_bytes + page - 1) / page * page + page;
  const Outcome outcome = shell(fmt::format(
      "mkdir small && unshare -m sh -c 'mount -t tmpfs -o size={} tmpfs small && TMPDIR={} "
      "\"$tb\" run {} {} -o small/r.json; code=$?; cp small/r.json kept.json; exit $code'",
      room, dir_.string(), settings, cases));
  EXPECT_EQ(outcome.exit_code, 1) << outcome.err;
  EXPECT_NE(outcome.err.find("No space left on device"), std::string::npos) << outcome.err;
  const std::string fallback = (dir_ / fmt::format("trainbench-unsaved-")).string();
  const auto named = outcome.err.find(fallback);
  ASSERT_NE(named, std::string::npos) << outcome.err;
  const std::string path =
      outcome.err.substr(named, outcome.err.find_first_of(" \n", named) - named);
  const nlohmann::json saved = nlohmann::json::parse(slurp(path));
  EXPECT_EQ(saved["results"].size(), 3u);
  EXPECT_FALSE(saved["finished_at"].is_null());
  EXPECT_EQ(results_in(dir_ / "kept.json"), 1u);
  for (const nlohmann::json& result : saved["results"]) EXPECT_EQ(result["status"], "passed");
}

}  // namespace
}  // namespace tb
