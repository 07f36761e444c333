#include "backends/cuda/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "backends/periodic_monitor.h"

namespace tb::cuda {
namespace {

// NVML's C types, as its API documents them.
using Return = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using Device = struct NvmlDevice*;
constexpr Return kSuccess = 0;
constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr int kClockSm = 1;         // NVML_CLOCK_SM

}  // namespace

struct Nvml::Api {
  Return (*init)();
  Return (*shutdown)();
  Return (*handle_by_index)(unsigned, Device*);
  Return (*power_usage)(Device, unsigned*);
  Return (*temperature)(Device, int, unsigned*);
  Return (*clock)(Device, int, unsigned*);
  Return (*event_reasons)(Device, unsigned long long*);
  Return (*energy)(Device, unsigned long long*);
  Return (*power_limit)(Device, unsigned*);
  Return (*pcie_generation)(Device, unsigned*);
  Return (*pcie_width)(Device, unsigned*);
};

std::unique_ptr<Nvml> Nvml::load(std::string* reason, const char* library) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* error = dlerror();
    *reason = fmt::format("NVML not loaded: {}", error ? error : library);
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  auto find = [&](auto& function, std::initializer_list<const char*> names) {
    for (const char* name : names)
      if (void* symbol = dlsym(handle, name)) {
        function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(symbol);
        return true;
      }
    function = nullptr;
    return false;
  };
  const bool essential =
      find(api->init, {"nvmlInit_v2", "nvmlInit"}) && find(api->shutdown, {"nvmlShutdown"}) &&
      find(api->handle_by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  // Optional counters: an older driver lacks some; their readings stay absent.
  find(api->power_usage, {"nvmlDeviceGetPowerUsage"});
  find(api->temperature, {"nvmlDeviceGetTemperature"});
  find(api->clock, {"nvmlDeviceGetClockInfo"});
  find(api->event_reasons,
       {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  find(api->energy, {"nvmlDeviceGetTotalEnergyConsumption"});
  find(api->power_limit, {"nvmlDeviceGetEnforcedPowerLimit"});
  find(api->pcie_generation, {"nvmlDeviceGetCurrPcieLinkGeneration"});
  find(api->pcie_width, {"nvmlDeviceGetCurrPcieLinkWidth"});
  if (!essential || api->init() != kSuccess) {
    *reason = fmt::format("NVML in {} {}", library,
                          essential ? "did not initialize" : "lacks nvmlInit / device handles");
    dlclose(handle);
    return nullptr;
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, std::move(api)));
}

Nvml::Nvml(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(handle_);
}

Nvml::Sample Nvml::sample(unsigned device) const {
  Sample sample;
  Device handle = nullptr;
  if (api_->handle_by_index(device, &handle) != kSuccess) return sample;
  unsigned value = 0;
  unsigned long long wide = 0;
  if (api_->power_usage && api_->power_usage(handle, &value) == kSuccess)
    sample.power_w = value / 1000.0;
  if (api_->temperature && api_->temperature(handle, kTemperatureGpu, &value) == kSuccess)
    sample.temperature_c = value;
  if (api_->clock && api_->clock(handle, kClockSm, &value) == kSuccess) sample.sm_clock_mhz = value;
  if (api_->event_reasons && api_->event_reasons(handle, &wide) == kSuccess)
    sample.throttle_reasons = static_cast<std::int64_t>(wide);
  if (api_->energy && api_->energy(handle, &wide) == kSuccess) sample.energy_j = wide / 1000.0;
  return sample;
}

nlohmann::json Nvml::describe(unsigned device) const {
  nlohmann::json d = nlohmann::json::object();
  Device handle = nullptr;
  if (api_->handle_by_index(device, &handle) != kSuccess) return d;
  unsigned value = 0;
  if (api_->power_limit && api_->power_limit(handle, &value) == kSuccess)
    d["power_limit_w"] = value / 1000.0;
  unsigned generation = 0, width = 0;
  if (api_->pcie_generation && api_->pcie_width &&
      api_->pcie_generation(handle, &generation) == kSuccess &&
      api_->pcie_width(handle, &width) == kSuccess)
    d["pcie_link"] = fmt::format("Gen{} x{}", generation, width);
  const Sample now = sample(device);
  if (now.power_w >= 0) d["power_w"] = now.power_w;
  if (now.temperature_c >= 0) d["temperature_c"] = now.temperature_c;
  if (now.sm_clock_mhz >= 0) d["sm_clock_mhz"] = now.sm_clock_mhz;
  return d;
}

namespace {

// NVML's clocks-event (throttle) reason bits.
constexpr std::pair<std::uint64_t, const char*> kThrottleReasons[] = {
    {0x1, "gpu_idle"},
    {0x2, "applications_clocks_setting"},
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
    {0x100, "display_clock_setting"}};

}  // namespace

std::unique_ptr<TelemetryMonitor> Nvml::monitor(std::shared_ptr<const Nvml> nvml, unsigned device,
                                                double period_s) {
  auto samples = std::make_shared<std::vector<Sample>>();
  return periodic_monitor([nvml, device, samples] { samples->push_back(nvml->sample(device)); },
                          [samples](double seconds) { return summarize(*samples, seconds); },
                          period_s);
}

nlohmann::json summarize(const std::vector<Nvml::Sample>& samples, double seconds) {
  nlohmann::json out = {{"source", "NVML"}, {"samples", samples.size()}, {"seconds", seconds}};
  double power_sum = 0, power_max = -1, temperature_max = -1, clock_sum = 0, clock_min = -1;
  int powers = 0, clocks = 0;
  std::uint64_t reasons = 0;
  double first_energy = -1, last_energy = -1;
  for (const Nvml::Sample& sample : samples) {
    if (sample.power_w >= 0) power_sum += sample.power_w, ++powers;
    power_max = std::max(power_max, sample.power_w);
    temperature_max = std::max(temperature_max, sample.temperature_c);
    if (sample.sm_clock_mhz >= 0) {
      clock_sum += sample.sm_clock_mhz, ++clocks;
      clock_min = clock_min < 0 ? sample.sm_clock_mhz : std::min(clock_min, sample.sm_clock_mhz);
    }
    if (sample.throttle_reasons >= 0)
      reasons |= static_cast<std::uint64_t>(sample.throttle_reasons);
    if (sample.energy_j >= 0) {
      if (first_energy < 0) first_energy = sample.energy_j;
      last_energy = sample.energy_j;
    }
  }
  if (powers) out["power_w"] = {{"mean", power_sum / powers}, {"max", power_max}};
  if (temperature_max >= 0) out["temperature_c_max"] = temperature_max;
  if (clocks) out["sm_clock_mhz"] = {{"mean", clock_sum / clocks}, {"min", clock_min}};
  nlohmann::json named = nlohmann::json::array();
  for (const auto& [bit, name] : kThrottleReasons)
    if (reasons & bit) named.push_back(name);
  out["throttle_reasons"] = named;
  // The counter moves in steps of the driver's sampling (tens of milliseconds): over a window
  // under a second one step is a large share of the total.
  constexpr double kShortestEnergyWindow = 1.0;
  if (first_energy < 0)
    out["energy_unavailable"] = "the GPU has no total-energy counter (NVML's needs Volta or later)";
  else if (seconds < kShortestEnergyWindow)
    out["energy_unavailable"] = fmt::format(
        "a {:.2f} s window is too short for NVML's energy counter (1 s at least)", seconds);
  else
    out["energy_j"] = last_energy - first_energy;
  return out;
}

}  // namespace tb::cuda
