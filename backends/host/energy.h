// The CPU's energy counters in Linux's powercap interface (/sys/class/powercap; Intel's RAPL
// and AMD's package energy both appear there as intel-rapl zones). Each zone counts microjoules
// in `energy_uj` up to `max_energy_range_uj`, then wraps to 0: at a few hundred watts a 32-bit
// range wraps within a minute, so a window is read often and the wraps are added back.
//
// Counted: the top-level package zones (intel-rapl:N, named package-N) and their dram subzones
// (intel-rapl:N:M named dram). Core and uncore subzones are inside their package, and a psys
// zone holds the packages too: adding them would count the same joules twice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb::cpu {

// Names a powercap tree to read instead of /sys/class/powercap (tests give a fake one).
inline constexpr const char* kPowercapRootVariable = "TRAINBENCH_POWERCAP_ROOT";

struct EnergyZone {
  std::string name;            // "package-0", "dram"
  std::string counter;         // its energy_uj file
  std::uint64_t range_uj = 0;  // the counter wraps past this
};

struct EnergyCounters {
  std::vector<EnergyZone> zones;  // readable now; empty when none is
  std::string unavailable;        // why none can be read, where zones is empty
};

// $TRAINBENCH_POWERCAP_ROOT, or /sys/class/powercap.
std::string powercap_root();
// The counted zones under `root` that this process can read, or why none.
EnergyCounters find_energy_counters(const std::string& root);

// Energy over a window, from readings of every zone; a counter is taken to wrap at most once
// between two readings (read at least once per range / peak power: the monitor reads every
// 0.25 s, and the smallest range seen, 2^32 uJ, lasts 4.3 s at 1 kW).
class EnergyWindow {
 public:
  explicit EnergyWindow(EnergyCounters counters);  // takes the first reading
  void read();                                     // one more reading of every zone
  // {source, zones [{name, energy_j}], energy_j, seconds, power_w {mean}}, or where no zone is
  // readable or none moved over the window, {source, seconds, energy_unavailable: why}.
  nlohmann::json summarize(double seconds) const;

 private:
  struct Zone {
    EnergyZone zone;
    std::uint64_t last_uj = 0;
    std::uint64_t total_uj = 0;
    std::string failed;  // why a later reading failed; the zone's total is then not used
  };
  std::vector<Zone> zones_;
  std::string unavailable_;
};

// The microjoules a counter moved from `before` to `after`, wrapping past `range_uj` at most once.
std::uint64_t counter_delta(std::uint64_t before, std::uint64_t after, std::uint64_t range_uj);

}  // namespace tb::cpu
