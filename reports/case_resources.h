// What a case used besides time: memory, measured against the workload's own count of it, and
// energy, from the device's counters over the timed runs. Both are recorded per result.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "workloads/workload.h"

namespace tb {

struct CaseMemory {
  std::uint64_t computed_bytes = 0;  // the workload's count (Workload::device_bytes)
  // The backend's allocator: the most it held at once during the case (set-up and validation
  // included) and during the timed runs alone (what the workload itself holds: the figure the
  // capacity planner predicts), and what its libraries may hold beyond the computed footprint
  // before a peak is flagged.
  std::optional<std::uint64_t> allocated_peak_bytes, timed_allocated_peak_bytes;
  std::uint64_t allowance_bytes = 0;
  // Device memory the driver called free before set-up and after the timed runs (GPUs).
  std::optional<std::uint64_t> device_free_before_bytes, device_free_after_bytes;
  // The process's resident memory as the case began, and its high-water mark over the timed
  // runs (reset as they start; where the kernel refused, since the process began, and unused).
  std::uint64_t resident_start_bytes = 0, resident_peak_bytes = 0;
  bool resident_peak_reset = false;
  // Its high-water mark over set-up and validation (reset as the case began; absent where the
  // kernel refused): validation's f64 copies of the largest ops sit beside the footprint there.
  std::optional<std::uint64_t> validation_resident_peak_bytes;
  bool device_is_host = false;  // a CPU backend: the resident memory holds the footprint
  std::string flag;             // a measured peak past the footprint and the allowance, and why
};

// Sets `memory.flag` where the allocator's peak, or on a CPU the process's growth over the case,
// exceeds the computed footprint by more than the allowance; clears it otherwise.
void flag_memory(CaseMemory& memory);
nlohmann::json to_json(const CaseMemory& memory);

// Energy over the timed runs (warm-up and samples), from the device's telemetry: the CPU's
// package and DRAM counters (powercap) or a GPU board's (NVML).
struct CaseEnergy {
  std::string source;  // "powercap", "NVML"
  double seconds = 0;  // the window the counters covered
  std::optional<double> joules, average_w;
  // The headline per joule: a rate's value over the mean power ("samples/J" from "samples/s").
  std::optional<double> per_joule;
  std::string per_joule_unit;
  std::string unavailable;  // why there is no figure (no counter, unreadable, frozen)
};

// From a telemetry monitor's account (its source, seconds and energy_j, or energy_unavailable)
// and the case's headline and its value (null where the case has none). Null where the telemetry
// says nothing of energy.
std::optional<CaseEnergy> case_energy(const nlohmann::json& telemetry,
                                      const std::optional<Headline>& headline,
                                      std::optional<double> headline_value);
nlohmann::json to_json(const CaseEnergy& energy);
std::optional<CaseEnergy> read_case_energy(const nlohmann::json& result);

}  // namespace tb
