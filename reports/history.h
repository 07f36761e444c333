// History: reports kept in one SQLite file, so a machine's cases can be followed across
// commits and dates. Adds are transactions taken with an immediate write lock and a busy
// timeout, so concurrent `history add` processes queue instead of losing reports.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

struct sqlite3;

namespace tb {

class HistoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

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
  // Opens the database; `write` creates it where it is missing. Throws HistoryError where it
  // cannot be opened (to read: missing) or is not a trainbench history.
  explicit History(const std::string& path, Access access = Access::write);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  // Adds a report (already read and checked); false when the same report is already there.
  bool add(const nlohmann::json& report, const std::string& source);
  std::vector<HistoryReport> list();
  // The whole reports of the machine `fingerprint`, newest first.
  std::vector<nlohmann::json> reports_of(const std::string& fingerprint);
  // Every case whose descriptor contains `workload`, on the machine `fingerprint` (default:
  // that of the newest report), in time order, change points flagged at `threshold`.
  std::vector<TrendSeries> trend(const std::string& workload,
                                 std::optional<std::string> fingerprint, double threshold);

 private:
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
