#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "reports/history.h"
#include "reports/report.h"

namespace tb {
namespace {

namespace fs = std::filesystem;

std::string data(const std::string& name) {
  return std::string(TRAINBENCH_TEST_DATA) + "/" + name;
}

class HistoryFile : public testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / fmt::format("trainbench-history-{}.db", getpid());
  }
  void TearDown() override {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_.string() + suffix);
  }
  fs::path path_;
};

TEST_F(HistoryFile, AddListTrend) {
  History history(path_.string());
  EXPECT_TRUE(history.add(read_report(data("baseline.json")), "baseline.json"));
  EXPECT_TRUE(history.add(read_report(data("current_same.json")), "current_same.json"));
  EXPECT_TRUE(history.add(read_report(data("current_regressed.json")), "current_regressed.json"));
  EXPECT_FALSE(
      history.add(read_report(data("baseline.json")), "again"));  // the same report once only
  EXPECT_TRUE(history.add(read_report(data("other_machine.json")), "other_machine.json"));

  const auto reports = history.list();
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_EQ(reports[0].source, "baseline.json");
  EXPECT_EQ(reports[0].cases, 3);

  // The other machine's report is newest: ask for this machine explicitly.
  const auto series = history.trend("gemm m=1024", reports[0].fingerprint, 0.05);
  ASSERT_EQ(series.size(), 1u);
  ASSERT_EQ(series[0].points.size(), 3u);
  EXPECT_EQ(series[0].points[0].change, "");
  EXPECT_EQ(series[0].points[1].change, "");        // within noise
  EXPECT_EQ(series[0].points[2].change, "slower");  // the 10% regression
  EXPECT_EQ(history.trend("gemm m=1024", std::nullopt, 0.05)[0].points.size(),
            1u);  // newest machine: other
}

// check --baseline-history's choice: this machine's reports, newest first, up to the count,
// neither the current run itself nor (unless any conditions go) one measured otherwise.
TEST_F(HistoryFile, BaselinesAreThisMachinesUnderTheSameConditions) {
  History history(path_.string());
  const nlohmann::json current = read_report(data("current_regressed.json"));
  nlohmann::json other_threads = read_report(data("current_same.json"));
  other_threads["settings"]["threads"] = 1;
  other_threads["started_at"] = "2099-01-01T00:00:00Z";  // the newest of this machine
  for (const char* name : {"baseline.json", "current_same.json", "other_machine.json"})
    history.add(read_report(data(name)), name);
  history.add(current, "current");  // a CI job adds its run before it checks
  history.add(other_threads, "other threads");

  BaselineSelection same = select_baselines(history, {current}, 5, false);
  ASSERT_EQ(same.reports.size(), 2u);
  EXPECT_EQ(same.other_conditions, 1u);
  EXPECT_GT(same.reports[0].value("started_at", ""), same.reports[1].value("started_at", ""));
  EXPECT_EQ(select_baselines(history, {current}, 1, false).reports.size(), 1u);

  BaselineSelection any = select_baselines(history, {current}, 5, true);
  ASSERT_EQ(any.reports.size(), 3u);
  EXPECT_EQ(any.other_conditions, 0u);
  EXPECT_EQ(any.reports[0]["settings"]["threads"], 1);
}

TEST_F(HistoryFile, PersistsAcrossOpens) {
  { History(path_.string()).add(read_report(data("baseline.json")), "b"); }
  EXPECT_EQ(History(path_.string()).list().size(), 1u);
}

TEST_F(HistoryFile, NotADatabaseIsAClearError) {
  std::ofstream(path_)
      << "this is not a database, just text that is long enough to be read as a header......";
  try {
    History history(path_.string());
    history.list();
    ADD_FAILURE() << "accepted";
  } catch (const HistoryError& e) {
    EXPECT_NE(std::string(e.what()).find(path_.string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tb
