// Telemetry read on a thread of its own while a case is timed: what the GPU's NVML monitor and
// the CPU's energy counters share.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/backend.h"

namespace tb {

// Calls `read` once now, then every `period_s` on a thread of its own, and once more at
// finish(), which returns `summarize(seconds since now)`. The two never run at once, so they
// may share what they capture without a lock.
std::unique_ptr<TelemetryMonitor> periodic_monitor(
    std::function<void()> read, std::function<nlohmann::json(double seconds)> summarize,
    double period_s);

// A monitor for a device whose counters cannot be read (a GPU without NVML, a CPU without a
// readable powercap zone): no thread, nothing read while the case is timed; its account (source,
// seconds, energy_unavailable) says why, so the case records that it has no energy figure.
std::unique_ptr<TelemetryMonitor> unread_telemetry(std::string source, std::string reason);

}  // namespace tb
