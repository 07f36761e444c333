#include "reports/history.h"

#include <sqlite3.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "reports/compare.h"

namespace tb {
namespace {

// SQLite's error as an exception. A file that is not a database, is damaged, or makes the
// fixed statements here fail (an unsupported format, a schema that is not ours) is bad input;
// the machine's failures (a full disk, an I/O error, a lock, memory) are not.
[[noreturn]] void throw_error(sqlite3* db, const std::string& path, const std::string& message) {
  const int code = sqlite3_errcode(db);
  if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT || code == SQLITE_ERROR ||
      code == SQLITE_FORMAT || code == SQLITE_SCHEMA || code == SQLITE_MISMATCH)
    throw NotAHistory(
        fmt::format("history {} is not a database or is damaged ({})", path, message));
  throw HistoryError(fmt::format("history {}: {}", path, message));
}

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
    throw_error(db_, path_, fmt::format("{} failed: {}", what, sqlite3_errmsg(db_)));
  }
  sqlite3* db_;
  sqlite3_stmt* statement_ = nullptr;
  std::string path_;
};

// Ours: "trnb" in the header's application_id, and the schema version in user_version
// (1: before results_hash, made without the marker).
constexpr int kApplicationId = 0x74726e62;
constexpr int kSchemaVersion = 2;

const char* const kReportsTable =
    "CREATE TABLE {} ("
    " id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL, git_commit TEXT NOT NULL,"
    " started_at TEXT NOT NULL, command TEXT NOT NULL, source TEXT NOT NULL,"
    " report TEXT NOT NULL, results_hash TEXT NOT NULL,"
    " UNIQUE (fingerprint, started_at, command, git_commit, results_hash))";

// The columns of the first schema, which carried no marker: a file with exactly these tables
// is a history of an earlier trainbench.
const std::set<std::string> kFirstReportsColumns = {
    "id", "fingerprint", "git_commit", "started_at", "command", "source", "report"};
const std::set<std::string> kCasesColumns = {"report_id", "workload", "dtype",    "backend",
                                             "status",    "median_s", "samples_s"};

// A report's results as a hash (FNV-1a, 64 bits), so that two reports alike in everything but
// their results are two reports.
std::string results_hash(const nlohmann::json& report) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const unsigned char c : report.value("results", nlohmann::json::array()).dump()) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", hash);
}

// "file:" URI of a path, for SQLite's query parameters.
std::string file_uri(const std::string& path) {
  std::string uri = "file:";
  for (const char c : std::filesystem::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#')
      uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    else
      uri += c;
  }
  return uri;
}

}  // namespace

void remove_history_files(const std::string& path) {
  std::error_code ignored;
  for (const char* suffix : {"", "-journal", "-wal", "-shm"})
    std::filesystem::remove(path + suffix, ignored);
}

History::History(const std::string& path, Access access) : path_(path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const bool existed = fs::exists(path, error);
  if (access == Access::read && !existed)
    throw NotAHistory(fmt::format("history {} does not exist (history add makes one)", path));
  if (fs::is_directory(path, error))
    throw NotAHistory(fmt::format("history {} is a folder, not a history file", path));
  // A WAL database is read through a shared-memory file beside it; where the folder cannot be
  // written (a read-only mount) nobody else can be writing either, so it is read as immutable.
  const std::string folder = fs::absolute(path).parent_path().string();
  open(access, access == Access::read && ::access(folder.c_str(), W_OK) != 0);
  try {
    identify_and_prepare(access);
  } catch (...) {
    sqlite3_close(db_);  // the destructor does not run when the constructor throws
    if (!existed) remove_history_files(path);  // nothing of a failed creation stays behind
    throw;
  }
}

void History::open(Access access, bool immutable) {
  const int flags = access == Access::read
                        ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
                        : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI;
  const std::string name = file_uri(path_) + (immutable ? "?immutable=1" : "");
  if (sqlite3_open_v2(name.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw NotAHistory(fmt::format("cannot open history {}: {}", path_, message));
  }
  sqlite3_busy_timeout(db_, kHistoryLockWaitSeconds * 1000);
}

// What the file holds, decided before anything is written to it: a history of this schema, of
// an earlier one (brought up to date when writing), an empty database (made a history when
// writing), or anything else (refused). Writing, the decision and the change are one
// transaction, so two processes making a history at once make it once.
void History::identify_and_prepare(Access access) {
  const auto integer = [&](const std::string& sql) {
    Statement query(db_, sql, path_);
    return query.step() ? query.integer(0) : 0;
  };
  const auto names = [&](const std::string& sql) {
    Statement query(db_, sql, path_);
    std::set<std::string> result;
    while (query.step()) result.insert(query.text(0));
    return result;
  };
  const bool writing = access == Access::write;
  try {
    if (writing) execute("BEGIN IMMEDIATE");
    const std::int64_t application_id = integer("PRAGMA application_id");
    const std::int64_t version = integer("PRAGMA user_version");
    const std::set<std::string> objects =
        names("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite%'");
    const bool ours = application_id == kApplicationId;
    const bool first_schema =
        application_id == 0 &&
        objects == std::set<std::string>{"reports", "cases", "cases_by_workload"} &&
        names("SELECT name FROM pragma_table_info('reports')") == kFirstReportsColumns &&
        names("SELECT name FROM pragma_table_info('cases')") == kCasesColumns;
    std::string refusal;
    if (ours && version > kSchemaVersion)
      refusal =
          fmt::format("is a history of a newer trainbench (schema {}, this one reads up to {})",
                      version, kSchemaVersion);
    else if (!ours && !first_schema && !(objects.empty() && application_id == 0))
      refusal =
          application_id != 0
              ? fmt::format("is an SQLite database of another program (application_id {:#x})",
                            application_id)
              : fmt::format("is an SQLite database but not a trainbench history (it holds {})",
                            fmt::join(objects, ", "));
    else if (objects.empty() && !writing)
      refusal = "is an empty database, not a history yet (history add makes one)";
    if (!refusal.empty())
      throw NotAHistory(fmt::format("{} {}; it was left unchanged", path_, refusal));
    if (writing) {
      if (objects.empty())
        create_schema();
      else if (!ours || version < kSchemaVersion)
        upgrade_schema();
      execute("COMMIT");
      if (objects.empty()) execute("PRAGMA journal_mode=WAL");  // readers beside a writer
    }
  } catch (...) {
    if (writing) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void History::create_schema() {
  execute(fmt::format(fmt::runtime(kReportsTable), "reports") +
          ";"
          "CREATE TABLE cases ("
          " report_id INTEGER NOT NULL REFERENCES reports(id), workload TEXT NOT NULL,"
          " dtype TEXT NOT NULL, backend TEXT NOT NULL, status TEXT NOT NULL, median_s REAL,"
          " samples_s TEXT NOT NULL);"
          "CREATE INDEX cases_by_workload ON cases (workload, dtype, backend);" +
          fmt::format("PRAGMA application_id={}; PRAGMA user_version={}", kApplicationId,
                      kSchemaVersion));
}

// From the first schema: each report gains its results' hash, which becomes part of its
// identity, so reports alike in all but their results can be added.
void History::upgrade_schema() {
  execute(fmt::format(fmt::runtime(kReportsTable), "reports_upgraded"));
  {
    Statement rows(db_,
                   "SELECT id, fingerprint, git_commit, started_at, command, source, report "
                   "FROM reports",
                   path_);
    while (rows.step()) {
      Statement insert(db_, "INSERT INTO reports_upgraded VALUES (?, ?, ?, ?, ?, ?, ?, ?)", path_);
      insert.bind(1, rows.integer(0));
      for (int column = 1; column < 7; ++column) insert.bind(column + 1, rows.text(column));
      insert.bind(8, results_hash(nlohmann::json::parse(rows.text(6), nullptr, false)));
      insert.step();
    }
  }
  execute(
      fmt::format("DROP TABLE reports; ALTER TABLE reports_upgraded RENAME TO reports; "
                  "PRAGMA application_id={}; PRAGMA user_version={}",
                  kApplicationId, kSchemaVersion));
}

History::~History() {
  sqlite3_close(db_);
}

void History::execute(const std::string& sql) {
  // The busy handler does not cover every contended case (two processes switching a new
  // database to WAL at once get SQLITE_BUSY at once), so busy answers are retried here too, for
  // the same bounded wait.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(kHistoryLockWaitSeconds);
  char* error = nullptr;
  int code = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  while ((code == SQLITE_BUSY || code == SQLITE_LOCKED) &&
         std::chrono::steady_clock::now() < deadline) {
    sqlite3_free(error);
    error = nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    code = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  }
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
    sqlite3_free(error);
    throw HistoryError(fmt::format(
        "history {} is locked: another process has held its write lock for over {} s (a "
        "history add still running?); nothing was changed",
        path_, kHistoryLockWaitSeconds));
  }
  if (code != SQLITE_OK) {
    const std::string message = error ? error : sqlite3_errmsg(db_);
    sqlite3_free(error);
    throw_error(db_, path_, message);
  }
}

History::Added History::add(const nlohmann::json& report, const std::string& source) {
  execute("BEGIN IMMEDIATE");  // take the write lock now; a concurrent writer waits (busy timeout)
  try {
    Statement insert(db_,
                     "INSERT OR IGNORE INTO reports (fingerprint, git_commit, started_at, command, "
                     "source, report, results_hash) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     path_);
    const std::string hash = results_hash(report);
    insert.bind(1, machine_fingerprint(report))
        .bind(2, report["tool"]["git_commit"].get<std::string>())
        .bind(3, report["started_at"].get<std::string>())
        .bind(4, report["command"].get<std::string>())
        .bind(5, source)
        .bind(6, report.dump())
        .bind(7, hash);
    insert.step();
    Added outcome{sqlite3_changes(db_) > 0, ""};
    if (!outcome.added) {
      Statement existing(db_,
                         "SELECT source FROM reports WHERE fingerprint = ? AND git_commit = ? AND "
                         "started_at = ? AND command = ? AND results_hash = ?",
                         path_);
      existing.bind(1, machine_fingerprint(report))
          .bind(2, report["tool"]["git_commit"].get<std::string>())
          .bind(3, report["started_at"].get<std::string>())
          .bind(4, report["command"].get<std::string>())
          .bind(5, hash);
      if (existing.step()) outcome.existing_source = existing.text(0);
    }
    if (outcome.added) {
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
    return outcome;
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
