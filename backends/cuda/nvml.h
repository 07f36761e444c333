// NVML, loaded at run time with dlopen: no NVML header or stub ships with the toolkit here,
// and a binary linked to libnvidia-ml would not start on a machine without a driver. Where
// the library or a device is missing, load() answers null with the reason, never an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"

namespace tb::cuda {

class Nvml {
 public:
  // One reading; a field is absent (negative, or nullopt-like -1) where NVML lacks the counter.
  struct Sample {
    double power_w = -1, temperature_c = -1, sm_clock_mhz = -1;
    double energy_j = -1;                // total since the driver loaded (Volta and later)
    std::int64_t throttle_reasons = -1;  // NVML's clocks-event reason bit mask
  };

  // `library`: the soname to open (libnvidia-ml.so.1 by default).
  static std::unique_ptr<Nvml> load(std::string* reason, const char* library = "libnvidia-ml.so.1");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  Sample sample(unsigned device) const;
  // Samples `device` every `period_s` on a thread of its own until finish(), which returns
  // summarize()'s account of the samples.
  static std::unique_ptr<TelemetryMonitor> monitor(std::shared_ptr<const Nvml> nvml,
                                                   unsigned device, double period_s = 0.02);
  // What a report records about the device: enforced power limit, PCIe link, and a sample.
  nlohmann::json describe(unsigned device) const;

  struct Api;

 private:
  Nvml(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

// What a report records of the samples taken over a case (in order): mean and peak power,
// peak temperature, lowest and mean SM clock, every throttle reason seen (NVML's clocks-event
// bits, named), and the energy the counter moved by (where it exists). Device-independent.
nlohmann::json summarize(const std::vector<Nvml::Sample>& samples, double seconds);

}  // namespace tb::cuda
