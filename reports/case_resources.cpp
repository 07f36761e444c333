#include "reports/case_resources.h"

#include <fmt/format.h>

namespace tb {
namespace {

double mib(std::uint64_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

// "samples/J" for "samples/s"; empty for what is not a rate (a time to train).
std::string per_joule_unit(const Headline& headline) {
  if (headline.lower_is_better || !headline.unit.ends_with("/s")) return "";
  return headline.unit.substr(0, headline.unit.size() - 2) + "/J";
}

}  // namespace

void flag_memory(CaseMemory& m) {
  m.flag.clear();
  const std::uint64_t limit = m.computed_bytes + m.allowance_bytes;
  // What the workload holds while it is timed; the case's peak (set-up and validation beside
  // it) where the timed one was not taken.
  const std::optional<std::uint64_t> peak =
      m.timed_allocated_peak_bytes ? m.timed_allocated_peak_bytes : m.allocated_peak_bytes;
  if (peak && *peak > limit) {
    m.flag = fmt::format(
        "the backend's allocations peaked at {:.1f} MiB {}, {:.1f} MiB past the computed "
        "footprint of {:.1f} MiB and the {:.0f} MiB allowance: the workload allocates more than "
        "it counts",
        mib(*peak), m.timed_allocated_peak_bytes ? "while timed" : "over the case",
        mib(*peak - m.computed_bytes), mib(m.computed_bytes), mib(m.allowance_bytes));
    return;
  }
  if (!m.device_is_host || !m.resident_peak_reset ||
      m.resident_peak_bytes <= m.resident_start_bytes)
    return;
  const std::uint64_t growth = m.resident_peak_bytes - m.resident_start_bytes;
  if (growth > limit)
    m.flag = fmt::format(
        "the process grew by {:.1f} MiB over the case, {:.1f} MiB past the computed footprint of "
        "{:.1f} MiB and the {:.0f} MiB allowance: host memory outside the backend's allocator "
        "(copies kept from set-up or validation, or a library's own)",
        mib(growth), mib(growth - m.computed_bytes), mib(m.computed_bytes), mib(m.allowance_bytes));
}

nlohmann::json to_json(const CaseMemory& m) {
  nlohmann::json j = {{"computed_bytes", m.computed_bytes},
                      {"allowance_bytes", m.allowance_bytes},
                      {"resident_start_bytes", m.resident_start_bytes},
                      {"resident_peak_bytes", m.resident_peak_bytes},
                      {"resident_peak_reset", m.resident_peak_reset}};
  if (m.validation_resident_peak_bytes)
    j["validation_resident_peak_bytes"] = *m.validation_resident_peak_bytes;
  if (m.allocated_peak_bytes) j["allocated_peak_bytes"] = *m.allocated_peak_bytes;
  if (m.timed_allocated_peak_bytes) j["timed_allocated_peak_bytes"] = *m.timed_allocated_peak_bytes;
  if (m.device_free_before_bytes) j["device_free_before_bytes"] = *m.device_free_before_bytes;
  if (m.device_free_after_bytes) j["device_free_after_bytes"] = *m.device_free_after_bytes;
  if (!m.flag.empty()) j["flag"] = m.flag;
  return j;
}

std::optional<CaseEnergy> case_energy(const nlohmann::json& telemetry,
                                      const std::optional<Headline>& headline,
                                      std::optional<double> headline_value) {
  if (!telemetry.is_object() ||
      (!telemetry.contains("energy_j") && !telemetry.contains("energy_unavailable")))
    return std::nullopt;
  CaseEnergy e;
  e.source = telemetry.value("source", "");
  e.seconds = telemetry.value("seconds", 0.0);
  if (telemetry.contains("energy_unavailable")) {
    e.unavailable = telemetry["energy_unavailable"].get<std::string>();
    return e;
  }
  e.joules = telemetry["energy_j"].get<double>();
  if (e.seconds > 0) e.average_w = *e.joules / e.seconds;
  if (headline && headline_value && e.average_w && *e.average_w > 0) {
    e.per_joule_unit = per_joule_unit(*headline);
    if (!e.per_joule_unit.empty()) e.per_joule = *headline_value / *e.average_w;
  }
  return e;
}

nlohmann::json to_json(const CaseEnergy& e) {
  nlohmann::json j = {{"source", e.source}, {"seconds", e.seconds}};
  if (!e.unavailable.empty()) j["unavailable"] = e.unavailable;
  if (e.joules) j["joules"] = *e.joules;
  if (e.average_w) j["average_w"] = *e.average_w;
  if (e.per_joule) j["per_joule"] = {{"value", *e.per_joule}, {"unit", e.per_joule_unit}};
  return j;
}

std::optional<CaseEnergy> read_case_energy(const nlohmann::json& result) {
  if (!result.contains("energy")) return std::nullopt;
  const nlohmann::json& j = result["energy"];
  CaseEnergy e;
  e.source = j.value("source", "");
  e.seconds = j.value("seconds", 0.0);
  e.unavailable = j.value("unavailable", "");
  if (j.contains("joules")) e.joules = j["joules"].get<double>();
  if (j.contains("average_w")) e.average_w = j["average_w"].get<double>();
  if (j.contains("per_joule")) {
    e.per_joule = j["per_joule"]["value"].get<double>();
    e.per_joule_unit = j["per_joule"]["unit"].get<std::string>();
  }
  return e;
}

}  // namespace tb
