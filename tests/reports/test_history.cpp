#include <gtest/gtest.h>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "reports/compare.h"
#include "reports/history.h"
#include "reports/report.h"

namespace tb {
namespace {

namespace fs = std::filesystem;

std::string data(const std::string& name) {
  return std::string(TRAINBENCH_TEST_DATA) + "/" + name;
}

// Runs `sql` on the SQLite file `path` (made where missing), as another program would.
void sqlite(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int code = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  EXPECT_EQ(code, SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
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
  EXPECT_TRUE(history.add(read_report(data("baseline.json")), "baseline.json").added);
  EXPECT_TRUE(history.add(read_report(data("current_same.json")), "current_same.json").added);
  EXPECT_TRUE(
      history.add(read_report(data("current_regressed.json")), "current_regressed.json").added);
  const History::Added again = history.add(read_report(data("baseline.json")), "again");
  EXPECT_FALSE(again.added);  // the same report once only, naming where it came from
  EXPECT_EQ(again.existing_source, "baseline.json");
  EXPECT_TRUE(history.add(read_report(data("other_machine.json")), "other_machine.json").added);

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
  } catch (const NotAHistory& e) {
    EXPECT_NE(std::string(e.what()).find(path_.string()), std::string::npos) << e.what();
  }
}

// Two runs alike in machine, start, command and commit but not in results are two reports.
TEST_F(HistoryFile, ReportsAlikeButForTheirResultsAreTwo) {
  History history(path_.string());
  nlohmann::json report = read_report(data("baseline.json"));
  EXPECT_TRUE(history.add(report, "d1/r.json").added);
  report["results"][0]["samples_s"][0] = report["results"][0]["samples_s"][0].get<double>() * 1.5;
  EXPECT_TRUE(history.add(report, "d2/r.json").added);
  const History::Added again = history.add(report, "d3/r.json");
  EXPECT_FALSE(again.added);
  EXPECT_EQ(again.existing_source, "d2/r.json");
  EXPECT_EQ(history.list().size(), 2u);
}

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Another program's SQLite files, one with a table named as ours, are refused, byte for byte
// unchanged, to write as to read.
TEST_F(HistoryFile, AnotherProgramsDatabaseIsRefusedAndLeftAsItWas) {
  for (const std::string& schema :
       {std::string("CREATE TABLE reports (id INTEGER PRIMARY KEY, title TEXT);"
                    "INSERT INTO reports (title) VALUES ('quarterly')"),
        std::string("PRAGMA application_id=1234; CREATE TABLE notes (text TEXT)")}) {
    fs::remove(path_);
    sqlite(path_, schema);
    const std::string before = bytes_of(path_);
    for (const History::Access access : {History::Access::write, History::Access::read}) {
      try {
        History history(path_.string(), access);
        ADD_FAILURE() << "accepted " << schema;
      } catch (const NotAHistory& e) {
        EXPECT_NE(std::string(e.what()).find("left unchanged"), std::string::npos) << e.what();
      }
    }
    EXPECT_EQ(bytes_of(path_), before) << schema;
    EXPECT_FALSE(fs::exists(path_.string() + "-wal"));
  }
}

// A history made before reports carried a results hash (and the file a marker) is read as it
// is and brought up to date by the first add.
TEST_F(HistoryFile, AHistoryOfTheFirstSchemaIsReadAndUpgraded) {
  sqlite(path_,
         "PRAGMA journal_mode=WAL;"
         "CREATE TABLE reports (id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL, git_commit "
         "TEXT NOT NULL, started_at TEXT NOT NULL, command TEXT NOT NULL, source TEXT NOT NULL,"
         " report TEXT NOT NULL, UNIQUE (fingerprint, started_at, command, git_commit));"
         "CREATE TABLE cases (report_id INTEGER NOT NULL REFERENCES reports(id), workload TEXT "
         "NOT NULL, dtype TEXT NOT NULL, backend TEXT NOT NULL, status TEXT NOT NULL, median_s "
         "REAL, samples_s TEXT NOT NULL);"
         "CREATE INDEX cases_by_workload ON cases (workload, dtype, backend);");
  nlohmann::json report = read_report(data("baseline.json"));
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    const std::string insert =
        fmt::format("INSERT INTO reports VALUES (1, '{}', '{}', '{}', 'cmd', 'old.json', '{}')",
                    machine_fingerprint(report), report["tool"]["git_commit"].get<std::string>(),
                    report["started_at"].get<std::string>(), report.dump());
    EXPECT_EQ(sqlite3_exec(db, insert.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  EXPECT_EQ(History(path_.string(), History::Access::read).list().size(), 1u);
  History history(path_.string());
  report["command"] = "cmd";
  EXPECT_FALSE(history.add(report, "same.json").added);  // the one there, hashed on upgrade
  report["results"][0]["samples_s"][0] = 1.0;
  EXPECT_TRUE(history.add(report, "new.json").added);
  EXPECT_EQ(history.list().size(), 2u);
}

TEST_F(HistoryFile, AMissingOrEmptyFileIsNoHistoryToRead) {
  EXPECT_THROW(History(path_.string(), History::Access::read), NotAHistory);
  EXPECT_FALSE(fs::exists(path_));
  std::ofstream{path_};  // touched: an empty database, to be made a history by add
  EXPECT_THROW(History(path_.string(), History::Access::read), NotAHistory);
  EXPECT_TRUE(History(path_.string()).list().empty());
}

// Another process holding the write lock: the add gives up after a bounded wait, naming the
// lock, and the history stays as it was.
TEST_F(HistoryFile, AHeldLockIsAnErrorAfterABoundedWait) {
  { History(path_.string()).add(read_report(data("baseline.json")), "b"); }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = fork();
  if (holder == 0) {
    sqlite3* db = nullptr;
    sqlite3_open(path_.c_str(), &db);
    sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    (void)!write(ready[1], "x", 1);
    sleep(60);
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  try {
    History history(path_.string());
    history.add(read_report(data("current_same.json")), "c");
    ADD_FAILURE() << "added under another process's lock";
  } catch (const HistoryError& e) {
    EXPECT_NE(std::string(e.what()).find("locked"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(fmt::format("{} s", kHistoryLockWaitSeconds)),
              std::string::npos)
        << e.what();
  }
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  EXPECT_EQ(History(path_.string(), History::Access::read).list().size(), 1u);
}

}  // namespace
}  // namespace tb
