// Published dense (non-sparse) peak rates of known NVIDIA data-center GPUs, in TFLOP/s, so a
// report puts the measured ceilings next to what the vendor quotes. Device-independent.
#pragma once

#include <optional>
#include <string_view>

namespace tb::cuda {

struct DatasheetRates {
  std::string_view model;             // matched as a substring of the device name
  double fp32, tf32, bf16, f16, fp8;  // dense TFLOP/s; 0 where the device has no such unit
};

// The entry whose model the device name contains (the more specific entries come first).
inline std::optional<DatasheetRates> datasheet_rates(std::string_view device_name) {
  static constexpr DatasheetRates kKnown[] = {
      {"H200", 67, 494.7, 989.4, 989.4, 1978.9},  // SXM; same tensor cores as H100 SXM
      {"H100 PCIe", 51, 378, 756, 756, 1513},    {"H100 NVL", 60, 417.5, 835, 835, 1670},
      {"H100", 67, 494.7, 989.4, 989.4, 1978.9},  // SXM
      {"A100", 19.5, 156, 312, 312, 0},          {"L40S", 91.6, 183, 362, 362, 733},
  };
  for (const DatasheetRates& rates : kKnown)
    if (device_name.find(rates.model) != std::string_view::npos) return rates;
  return std::nullopt;
}

}  // namespace tb::cuda
