// Runs one backend's cases in a child trainbench with a changed environment, for settings a
// library reads only when it loads (OPENBLAS_CORETYPE, OMP_*, ONEDNN_*), and hands back the
// child's report to merge into the parent's.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb {

// --child-env BACKEND:NAME=VALUE,-NAME,...  ('-NAME' unsets NAME)
struct ChildEnvironment {
  std::string backend;
  std::vector<std::pair<std::string, std::optional<std::string>>> changes;  // nullopt: unset

  // Throws UsageError for a malformed spec or an unknown backend.
  static ChildEnvironment parse(const std::string& spec);
  // The backend name its results carry: "cpu-openblas[-OPENBLAS_CORETYPE,OMP_WAIT_POLICY=active]".
  std::string label() const;
};

struct ChildOutcome {
  std::optional<nlohmann::json> report;  // the child's report, when it produced one
  std::string error;                     // why not
};

// Runs this binary as `trainbench run -b BACKEND <arguments> -o <report_path>` with the
// environment changed, its table and progress going to ours, and reads its report.
ChildOutcome run_child(const ChildEnvironment& environment,
                       const std::vector<std::string>& arguments, const std::string& report_path);

}  // namespace tb
