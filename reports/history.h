// History: reports kept in one SQLite file, so a machine's cases can be followed across
// commits and dates. Adds are transactions taken with an immediate write lock, so concurrent
// `history add` processes queue instead of losing reports; a lock held longer than
// kHistoryLockWait is an error naming it. A history carries its own application_id: any
// other SQLite file is refused and left as it was.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/status.h"

struct sqlite3;

namespace tb {

class HistoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// The path is no history this command can use (missing to read, a folder, not to be opened,
// not a database, damaged, another program's database, a newer schema): bad input, left
// unchanged.
// Anything else (a full disk, a lock held past kHistoryLockWaitSeconds) is a HistoryError.
class NotAHistory : public UsageError {
 public:
  using UsageError::UsageError;
};

// Removes a history file and SQLite's files beside it (journal, WAL, shared memory).
void remove_history_files(const std::string& path);

// How long a command waits for another process's write lock on the history.
inline constexpr int kHistoryLockWaitSeconds = 5;

struct HistoryReport {
  std::int64_t id = 0;
  std::string started_at, git_commit, fingerprint, source;
  std::int64_t cases = 0;
};

struct TrendPoint {
  std::string started_at, git_commit;
  double median_s = 0;
  std::vector<double> samples_s;
  std::string change;  // "slower" / "faster" against the previous point when significant, else ""
};

struct TrendSeries {
  std::string workload, dtype, backend;
  std::vector<TrendPoint> points;
};

class History {
 public:
  enum class Access { read, write };
  // Opens the database; `write` creates it where it is missing and brings a history of an
  // earlier schema up to date. Throws NotAHistory where it is no history to use (to read:
  // missing or empty), HistoryError where it cannot be read or changed. A
  // history is read without write access (a read-only mount, another user's file).
  explicit History(const std::string& path, Access access = Access::write);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  // Adds a report (already read and checked). A report is the same as one already there when
  // machine, start, command, commit and results all match: then nothing is added and the
  // source that report was added from is returned.
  struct Added {
    bool added = false;
    std::string existing_source;  // where !added
  };
  Added add(const nlohmann::json& report, const std::string& source);
  std::vector<HistoryReport> list();
  // The whole reports of the machine `fingerprint`, newest first.
  std::vector<nlohmann::json> reports_of(const std::string& fingerprint);
  // Every case whose descriptor contains `workload`, on the machine `fingerprint` (default:
  // that of the newest report), in time order, change points flagged at `threshold`.
  std::vector<TrendSeries> trend(const std::string& workload,
                                 std::optional<std::string> fingerprint, double threshold);

 private:
  void open(Access access, bool immutable);
  void identify_and_prepare(Access access);
  void create_schema();
  void upgrade_schema();
  void execute(const std::string& sql);
  sqlite3* db_ = nullptr;
  std::string path_;
};

// `check --baseline-history`'s baselines: the newest reports of the current runs' machine,
// at most `count`, leaving out the current runs themselves (a CI job adds its run before it
// checks) and, unless `any_conditions`, those measured under other conditions than the first
// current run (counted in other_conditions).
struct BaselineSelection {
  std::vector<nlohmann::json> reports;  // newest first
  std::size_t other_conditions = 0;
};
BaselineSelection select_baselines(History& history, const std::vector<nlohmann::json>& currents,
                                   std::size_t count, bool any_conditions);

}  // namespace tb
