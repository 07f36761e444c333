// One self-contained HTML page from reports: a roofline per machine and backend, bars per
// workload across backends and machines, time-to-train curves where present, and the host
// inventory. Charts are inline SVG built here; no script or style is fetched.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb {

// reports: (label, report) pairs.
std::string render_html(const std::vector<std::pair<std::string, nlohmann::json>>& reports);

}  // namespace tb
