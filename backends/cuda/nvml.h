// NVML, loaded at run time with dlopen: no NVML header or stub ships with the toolkit here,
// and a binary linked to libnvidia-ml would not start on a machine without a driver. Where
// the library or a device is missing, load() answers null with the reason, never an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

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
  // What a report records about the device: enforced power limit, PCIe link, and a sample.
  nlohmann::json describe(unsigned device) const;

  struct Api;

 private:
  Nvml(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

}  // namespace tb::cuda
