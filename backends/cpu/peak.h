// Peak arithmetic probe: independent FMA (fp32) or bf16 dot-product chains held in registers,
// so the figure is the core's arithmetic rate and nothing else.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cpu/host_info.h"

namespace tb::cpu {

// Operand 0: one fp64 per thread, the mean lane value of its accumulators.
Status plan_peak(const PeakOp& op, const HostInventory& host, int threads,
                 std::unique_ptr<Plan>* out);

struct PeakRates {
  double fp32_gflops = 0, bf16_gflops = 0;
  std::string model;  // the formula and its factors, for the report
};
// threads x FMA pipes x fp32 lanes x 2 flops x clock; bf16 dot products do twice the fp32 work.
PeakRates theoretical_peak(const HostInventory& host, int threads, double clock_ghz);

}  // namespace tb::cpu
