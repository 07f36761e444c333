#include "reports/history.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "reports/compare.h"

namespace tb {
namespace {

// A prepared statement that finalizes itself.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql, const std::string& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement_, nullptr) != SQLITE_OK) fail("prepare");
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement& bind(int index, const std::string& text) {
    sqlite3_bind_text(statement_, index, text.c_str(), -1, SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int index, double value) {
    sqlite3_bind_double(statement_, index, value);
    return *this;
  }
  Statement& bind(int index, std::int64_t value) {
    sqlite3_bind_int64(statement_, index, value);
    return *this;
  }
  bool step() {  // true while there is a row
    const int rc = sqlite3_step(statement_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail("step");
    return false;
  }
  std::string text(int column) const {
    const auto* value = sqlite3_column_text(statement_, column);
    return value ? reinterpret_cast<const char*>(value) : "";
  }
  double real(int column) const { return sqlite3_column_double(statement_, column); }
  std::int64_t integer(int column) const { return sqlite3_column_int64(statement_, column); }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw HistoryError(fmt::format("history {}: {} failed: {}", path_, what, sqlite3_errmsg(db_)));
  }
  sqlite3* db_;
  sqlite3_stmt* statement_ = nullptr;
  std::string path_;
};

}  // namespace

History::History(const std::string& path, Access access) : path_(path) {
  const int flags =
      access == Access::read ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw HistoryError(fmt::format("cannot open history {}: {}", path, message));
  }
  try {
    sqlite3_busy_timeout(db_, 60'000);  // wait for another writer rather than fail
    if (access == Access::read) {
      execute("SELECT id FROM reports LIMIT 0; SELECT report_id FROM cases LIMIT 0");
      return;
    }
    execute("PRAGMA journal_mode=WAL");
    execute(
        "CREATE TABLE IF NOT EXISTS reports ("
        " id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL, git_commit TEXT NOT NULL,"
        " started_at TEXT NOT NULL, command TEXT NOT NULL, source TEXT NOT NULL,"
        " report TEXT NOT NULL, UNIQUE (fingerprint, started_at, command, git_commit));"
        "CREATE TABLE IF NOT EXISTS cases ("
        " report_id INTEGER NOT NULL REFERENCES reports(id), workload TEXT NOT NULL,"
        " dtype TEXT NOT NULL, backend TEXT NOT NULL, status TEXT NOT NULL, median_s REAL,"
        " samples_s TEXT NOT NULL);"
        "CREATE INDEX IF NOT EXISTS cases_by_workload ON cases (workload, dtype, backend);");
  } catch (...) {
    sqlite3_close(db_);  // the destructor does not run when the constructor throws
    throw;
  }
}

History::~History() {
  sqlite3_close(db_);
}

void History::execute(const std::string& sql) {
  // The busy handler does not cover every contended case (two processes switching a new
  // database to WAL at once get SQLITE_BUSY at once), so busy answers are retried here too.
  constexpr auto kRetryFor = std::chrono::seconds(60);
  const auto deadline = std::chrono::steady_clock::now() + kRetryFor;
  char* error = nullptr;
  int code = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  while ((code == SQLITE_BUSY || code == SQLITE_LOCKED) &&
         std::chrono::steady_clock::now() < deadline) {
    sqlite3_free(error);
    error = nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    code = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  }
  if (code != SQLITE_OK) {
    const std::string message = error ? error : sqlite3_errmsg(db_);
    sqlite3_free(error);
    throw HistoryError(fmt::format("history {}: {}", path_, message));
  }
}

bool History::add(const nlohmann::json& report, const std::string& source) {
  execute("BEGIN IMMEDIATE");  // take the write lock now; a concurrent writer waits (busy timeout)
  try {
    Statement insert(db_,
                     "INSERT OR IGNORE INTO reports (fingerprint, git_commit, started_at, command, "
                     "source, report) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     path_);
    insert.bind(1, machine_fingerprint(report))
        .bind(2, report["tool"]["git_commit"].get<std::string>())
        .bind(3, report["started_at"].get<std::string>())
        .bind(4, report["command"].get<std::string>())
        .bind(5, source)
        .bind(6, report.dump());
    insert.step();
    const bool added = sqlite3_changes(db_) > 0;
    if (added) {
      const std::int64_t id = sqlite3_last_insert_rowid(db_);
      for (const ResultRecord& record : read_results(report)) {
        Statement row(
            db_,
            "INSERT INTO cases (report_id, workload, dtype, backend, status, median_s, samples_s) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            path_);
        row.bind(1, id)
            .bind(2, record.key.workload)
            .bind(3, record.key.dtype)
            .bind(4, record.key.backend)
            .bind(5, std::string(case_status_name(record.status)))
            .bind(6, record.stats ? record.stats->median : 0.0)
            .bind(7, (*record.json)["samples_s"].dump());
        row.step();
      }
    }
    execute("COMMIT");
    return added;
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::vector<HistoryReport> History::list() {
  Statement query(
      db_,
      "SELECT r.id, r.started_at, r.git_commit, r.fingerprint, r.source, COUNT(c.report_id) "
      "FROM reports r LEFT JOIN cases c ON c.report_id = r.id GROUP BY r.id ORDER BY r.started_at, "
      "r.id",
      path_);
  std::vector<HistoryReport> reports;
  while (query.step())
    reports.push_back({query.integer(0), query.text(1), query.text(2), query.text(3), query.text(4),
                       query.integer(5)});
  return reports;
}

std::vector<nlohmann::json> History::reports_of(const std::string& fingerprint) {
  Statement query(
      db_, "SELECT report FROM reports WHERE fingerprint = ? ORDER BY started_at DESC, id DESC",
      path_);
  query.bind(1, fingerprint);
  std::vector<nlohmann::json> reports;
  while (query.step()) reports.push_back(nlohmann::json::parse(query.text(0)));
  return reports;
}

std::vector<TrendSeries> History::trend(const std::string& workload,
                                        std::optional<std::string> fingerprint, double threshold) {
  if (!fingerprint) {
    Statement newest(
        db_, "SELECT fingerprint FROM reports ORDER BY started_at DESC, id DESC LIMIT 1", path_);
    if (!newest.step()) return {};
    fingerprint = newest.text(0);
  }
  Statement query(
      db_,
      "SELECT c.workload, c.dtype, c.backend, r.started_at, r.git_commit, c.median_s, c.samples_s "
      "FROM cases c JOIN reports r ON r.id = c.report_id "
      "WHERE r.fingerprint = ? AND c.status = 'passed' AND instr(c.workload, ?) > 0 "
      "ORDER BY c.workload, c.dtype, c.backend, r.started_at, r.id",
      path_);
  query.bind(1, *fingerprint).bind(2, workload);
  std::map<std::tuple<std::string, std::string, std::string>, TrendSeries> series;
  while (query.step()) {
    TrendSeries& s = series[{query.text(0), query.text(1), query.text(2)}];
    s.workload = query.text(0);
    s.dtype = query.text(1);
    s.backend = query.text(2);
    TrendPoint point{query.text(3), query.text(4), query.real(5),
                     nlohmann::json::parse(query.text(6)).get<std::vector<double>>(), ""};
    if (!s.points.empty()) {
      const Verdict verdict =
          compare_samples(s.points.back().samples_s, point.samples_s, threshold).verdict;
      if (verdict == Verdict::slower || verdict == Verdict::faster)
        point.change = std::string(verdict_name(verdict));
    }
    s.points.push_back(std::move(point));
  }
  std::vector<TrendSeries> result;
  for (auto& [key, s] : series) result.push_back(std::move(s));
  return result;
}

BaselineSelection select_baselines(History& history, const std::vector<nlohmann::json>& currents,
                                   std::size_t count, bool any_conditions) {
  BaselineSelection selection;
  for (nlohmann::json& report : history.reports_of(machine_fingerprint(currents.front()))) {
    if (selection.reports.size() == count) break;
    const auto is_report = [&](const nlohmann::json& current) {
      return report.value("started_at", "") == current.value("started_at", "") &&
             report.value("command", "") == current.value("command", "");
    };
    if (std::any_of(currents.begin(), currents.end(), is_report)) continue;
    if (!any_conditions && !condition_differences(report, currents.front()).empty()) {
      ++selection.other_conditions;
      continue;
    }
    selection.reports.push_back(std::move(report));
  }
  return selection;
}

}  // namespace tb
