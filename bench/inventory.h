// The host block of a report and the per-backend block (device description, measured peaks).
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "bench/harness.h"

namespace tb {

// CPU, memory, OS, compiler, library versions and the environment variables that change
// results (OMP_*, OPENBLAS_*, ONEDNN_*, DNNL_*, NVIDIA_TF32_OVERRIDE, CUDA_*, LD_PRELOAD,
// MALLOC_CONF; across ranks OMPI_MCA_*, UCX_*, NCCL_* and Slurm's job geometry).
nlohmann::json host_inventory_json();
std::map<std::string, std::string> result_affecting_environment();

// name, version, git commit, build type of this binary.
nlohmann::json tool_json();

struct PeakRate {
  std::optional<double> measured_gflops, theoretical_gflops;
  std::optional<double> probe_gflops;  // what a probe that is no ceiling reached
  std::string reason;                  // why there is no measured figure
};
// Measured peak per dtype ("f32", "bf16") through the backend's peak probe, with the
// theoretical figure beside it.
std::map<std::string, PeakRate> measure_peaks(Backend& backend, const HarnessConfig& harness);
nlohmann::json peaks_json(const std::map<std::string, PeakRate>& peaks);
// The peaks as peaks_json wrote them (a report's backends[].peaks).
std::map<std::string, PeakRate> peaks_from_json(const nlohmann::json& peaks);

// Current UTC time as ISO 8601.
std::string utc_now();

}  // namespace tb
