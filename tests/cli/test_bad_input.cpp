// Bad input to the report readers and the run command: each is exit 2 with one line saying
// what is wrong, never a misleading success (a zero time read as a speed, one report counted
// as several runs, a costs entry silently ignored).
#include <functional>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_fixture.h"

namespace tb {
namespace {

std::string data(const std::string& name) {
  return std::string(TRAINBENCH_SOURCE_DIR) + "/tests/reports/data/" + name;
}

class BadInput : public Cli {
 protected:
  // Exit 2 and one line on stderr holding `says`.
  void expect_refused(const std::vector<std::string>& args, const std::string& says) {
    const Outcome outcome = run(args);
    EXPECT_EQ(outcome.exit_code, 2) << outcome.err;
    EXPECT_NE(outcome.err.find(says), std::string::npos) << outcome.err;
    EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
  }
  // The baseline fixture, changed by `edit`, written to `name` in the test's folder.
  std::string edited_report(const std::string& name,
                            const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json report = nlohmann::json::parse(slurp(data("baseline.json")));
    edit(report);
    std::ofstream(dir_ / name) << report.dump(2);
    return (dir_ / name).string();
  }
};

TEST_F(BadInput, TheSameCaseTwiceOnTheCommandLineIsRefused) {
  expect_usage_error(
      {"run", "-b", "cpu-onednn", "-w", "gemm m=64", "-w", "gemm m=64", "-w", "gemm m=64"},
      "workload 'gemm m=64', workload 'gemm m=64' given more than once");
  expect_usage_error({"run", "-b", "cpu-onednn", "-w", "gemm m=64 n=32", "-w", "gemm n=32 m=64"},
                     "workload 'gemm n=32 m=64' given more than once");
  expect_usage_error({"run", "-b", "cpu-onednn,cpu-onednn", "-w", "gemm m=64"},
                     "backend 'cpu-onednn' given more than once");
}

// A report holding one case twice (a report of an earlier build run with -w twice) would be
// read as two runs by check and as one, the last, by compare: every reader refuses it.
TEST_F(BadInput, AReportHoldingACaseTwiceIsRefusedByEveryReader) {
  const std::string twice = edited_report("twice.json", [](nlohmann::json& report) {
    nlohmann::json failed = report["results"][0];
    failed["status"] = "failed";
    failed["reason"] = "validation failed: wrong";
    failed["reason_code"] = "validation_failed";
    report["results"].insert(report["results"].begin(), failed);
  });
  const std::string says = "is there twice";
  expect_refused({"compare", data("baseline.json"), twice}, says);
  expect_refused({"check", "--baseline", data("baseline.json"), "--current", twice}, says);
  expect_refused({"summary", twice}, says);
  expect_refused({"history", "--db", "h.db", "add", twice}, says);
  EXPECT_FALSE(fs::exists(dir_ / "h.db"));
}

// A passed result whose samples are zero would be read as an infinite speed.
TEST_F(BadInput, APassedResultWithoutAPositiveTimeIsRefused) {
  const std::string zero = edited_report("zero.json", [](nlohmann::json& report) {
    for (auto& sample : report["results"][1]["samples_s"]) sample = 0.0;
  });
  const std::string says = "has a sample of 0.0 s (a time must be positive)";
  expect_refused({"compare", data("baseline.json"), zero}, says);
  expect_refused({"check", "--baseline", data("baseline.json"), "--current", zero}, says);
  expect_refused({"summary", zero}, says);
  expect_refused({"history", "--db", "h.db", "add", zero}, says);
  const std::string negative = edited_report("negative.json", [](nlohmann::json& report) {
    report["results"][0]["samples_s"][2] = -1e-3;
  });
  expect_refused({"compare", data("baseline.json"), negative},
                 "samples_s[2]: -0.001 is below the minimum 0");
}

TEST_F(BadInput, AReportGivenTwiceToCheckIsRefused) {
  const std::string baseline = data("baseline.json");
  expect_refused({"check", "--baseline", baseline, "--current", baseline},
                 "is given twice (as a baseline and as a current run)");
  fs::copy_file(baseline, dir_ / "b.json");
  fs::create_symlink(dir_ / "b.json", dir_ / "link.json");
  expect_refused(
      {"check", "--baseline", "b.json", "link.json", "--current", data("current_same.json")},
      "link.json is given twice");
}

TEST_F(BadInput, ACostsEntryForNoReportOrWithAnUnknownKeyIsRefused) {
  const std::string a = data("baseline.json"), b = data("current_same.json");
  std::ofstream(dir_ / "typo.json") << R"({"baseline.json": {"price_per_hour": 3, "wats": 700}})";
  expect_refused({"compare", a, b, "--costs", "typo.json"},
                 "unknown key 'wats' in the entry of baseline.json");
  std::ofstream(dir_ / "other.json") << R"({"baseline.jsn": {"price_per_hour": 3}})";
  expect_refused({"summary", a, "--costs", "other.json"},
                 "'baseline.jsn' is none of the reports given");
  fs::create_directories(dir_ / "folder");
  expect_refused({"compare", a, b, "--costs", "folder"}, "cannot read costs file folder");
}

// What the command-line parser would misread is said plainly, and what a descriptor or file name
// holds reaches the terminal escaped: an escape sequence cannot recolour it, a newline cannot
// split the line.
TEST_F(BadInput, MisreadArgumentsAreNamed) {
  expect_refused({"foo"}, "unknown subcommand 'foo' (expected one of: list, info, run");
  expect_refused({"history", "--db", "h.db", "foo"}, "unknown subcommand 'foo' of history");
  expect_refused({"check", "--baseline", "--current", data("baseline.json")},
                 "--baseline needs a value before --current");
  expect_refused({"run", "-b", ",", "-w", "gemm m=64"}, "-b ',' holds an empty name");
  expect_refused({"run", "-w", "gemm m=64 shapes=/tmp/list.txt"},
                 "'/' is not allowed (keys and values hold letters, digits and _ - . , + : "
                 "only); shapes= takes a list's name, not a path");
  expect_refused({"run", "-w", "gemm m=\xc3\xa9"}, "the byte 0xc3 (not ASCII) is not allowed");
  const Outcome escaped = run({"run", "-w", "gemm m=6\x1b[31m4\nforged line"});
  EXPECT_EQ(escaped.exit_code, 2);
  EXPECT_NE(escaped.err.find("m=6\\x1b[31m4\\nforged"), std::string::npos) << escaped.err;
  EXPECT_EQ(escaped.err.find('\x1b'), std::string::npos) << escaped.err;
  EXPECT_EQ(std::count(escaped.err.begin(), escaped.err.end(), '\n'), 1) << escaped.err;
  const Outcome named = run({"compare", "a\x1b]0;title\x07.json", data("baseline.json")});
  EXPECT_EQ(named.exit_code, 2);
  EXPECT_NE(named.err.find("a\\x1b]0;title\\x07.json"), std::string::npos) << named.err;
}

// oneDNN ignores a cap it does not know without a word; trainbench refuses it as it refuses
// its own.
TEST_F(BadInput, AnIsaCapNamingNoIsaIsRefused) {
  for (const char* variable : {"ONEDNN_MAX_CPU_ISA", "TRAINBENCH_MAX_ISA"}) {
    const Outcome outcome = run({"run", "-b", "cpu-onednn", "-w", "gemm m=64", "-o", report_path()},
                                true, {{variable, "garbage"}});
    EXPECT_EQ(outcome.exit_code, 2) << variable << outcome.err;
    EXPECT_NE(outcome.err.find("garbage"), std::string::npos) << outcome.err;
    EXPECT_FALSE(fs::exists(report_path()));
  }
}

TEST_F(BadInput, AnUnusableTemporaryFolderIsNamed) {
  std::ofstream(dir_ / "a-file") << "x";
  for (const auto& [tmpdir, says] : std::vector<std::pair<std::string, std::string>>{
           {"", "TMPDIR is set but empty"},
           {(dir_ / "missing").string(), "cannot be used for temporary files"},
           {(dir_ / "a-file").string(), "is not a folder"}}) {
    const Outcome outcome = run({"run", "-b", "cpu-onednn", "-w", "gemm m=64", "-o", report_path()},
                                true, {{"TMPDIR", tmpdir}});
    EXPECT_EQ(outcome.exit_code, 2) << tmpdir << outcome.err;
    EXPECT_NE(outcome.err.find(says), std::string::npos) << outcome.err;
    const Outcome ab = run({"ab", "--baseline-bin", TRAINBENCH_BINARY, "--current-bin",
                            TRAINBENCH_BINARY, "-w", "gemm m=64"},
                           true, {{"TMPDIR", tmpdir}});
    EXPECT_EQ(ab.exit_code, 2) << tmpdir << ab.err;
    EXPECT_NE(ab.err.find(says), std::string::npos) << ab.err;
  }
}

TEST_F(BadInput, AbSaysWhichBuildFailedAndLeavesNothingBehind) {
  std::ofstream(dir_ / "a-file") << "x";
  expect_refused({"ab", "--baseline-bin", TRAINBENCH_BINARY, "--current-bin", TRAINBENCH_BINARY,
                  "--out-dir", "a-file", "-w", "gemm m=64"},
                 "--out-dir a-file cannot be made a folder");
  fs::create_directories(dir_ / "tmp");
  const std::vector<std::pair<std::string, std::string>> env = {
      {"TMPDIR", (dir_ / "tmp").string()}};
  // A run option the builds refuse is bad input, named as the build's refusal.
  const Outcome refused = run({"ab", "--baseline-bin", TRAINBENCH_BINARY, "--current-bin",
                               TRAINBENCH_BINARY, "-w", "gemm m=64", "--min-reps", "zero"},
                              false, env);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("refused the run's options in round 1"), std::string::npos)
      << refused.err;
  // A baseline "build" that exits 0 and writes no report.
  const Outcome silent = run(
      {"ab", "--baseline-bin", "/bin/true", "--current-bin", TRAINBENCH_BINARY, "-w", "gemm m=64"},
      false, env);
  EXPECT_EQ(silent.exit_code, 1) << silent.err;
  EXPECT_NE(silent.err.find("/bin/true wrote no report in round 1"), std::string::npos)
      << silent.err;
  EXPECT_TRUE(fs::is_empty(dir_ / "tmp"));
}

// The longest name the file system allows is a report name like any other.
TEST_F(BadInput, AReportNamedWithTheLongestLegalNameIsWritten) {
  const std::string name = std::string(250, 'r') + ".json";
  const Outcome outcome = run({"run", "-b", "cpu-onednn", "-w", "gemm m=64", "-o", name});
  EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_TRUE(fs::is_regular_file(dir_ / name));
}

// OpenBLAS retries a failed memory map for ever while it loads: under an address-space limit
// too low for it, the binary refuses at once, naming the limit, instead of hanging before main.
TEST_F(BadInput, AnAddressSpaceLimitNeverHangs) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: no limit applies";
#else
  // From a limit every build starts under down to one its libraries do not fit in: each
  // starts, is refused by the check, or (the lowest) by the dynamic loader, never hangs.
  bool refused = false;
  for (int mib = 4096; mib >= 128; mib -= 128) {
    const Outcome outcome =
        shell(fmt::format("ulimit -v {} && timeout 60 \"$tb\" --help > /dev/null", mib * 1024));
    ASSERT_NE(outcome.exit_code, 124) << "hung under ulimit -v of " << mib << " MiB";
    if (outcome.exit_code == 0) continue;
    if (outcome.exit_code == 127) break;  // the loader could not map the libraries
    EXPECT_EQ(outcome.exit_code, 1) << outcome.err;
    EXPECT_NE(outcome.err.find(fmt::format("the address-space limit (ulimit -v) of {} MiB", mib)),
              std::string::npos)
        << outcome.err;
    refused = true;
  }
#if defined(TRAINBENCH_HAVE_OPENBLAS)
  EXPECT_TRUE(refused) << "no limit met the check before the loader's own refusal";
#endif
#endif
}

}  // namespace
}  // namespace tb
