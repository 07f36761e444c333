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

}  // namespace
}  // namespace tb
