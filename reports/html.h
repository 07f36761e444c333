// One self-contained HTML page from reports: summary's answers, a roofline per machine and
// backend, bars per workload across backends and machines, where training steps' time goes,
// time-to-train curves where present, each case's history where given, and the host inventory.
// Charts are inline SVG built here; no script or style is fetched.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/history.h"

namespace tb {

// reports: (label, report) pairs; history: cases followed over a history database's reports
// (History::trend), drawn one chart each.
std::string render_html(const std::vector<std::pair<std::string, nlohmann::json>>& reports,
                        const std::vector<TrendSeries>& history = {});

}  // namespace tb
