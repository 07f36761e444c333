// Peak arithmetic: the measured probe (independent FMA (fp32) or bf16 dot-product chains held in
// registers, so the figure is the core's arithmetic rate and nothing else) and the theoretical
// figure it is compared with (peak_table.h's per-core rate x cores used x measured clock).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/host/host_info.h"
#include "backends/host/isa.h"

namespace tb::cpu {

// The ISA level the CPU probes and the theoretical peak use: the best level the CPU runs,
// capped by TRAINBENCH_MAX_ISA (our kernels) and, for a oneDNN backend, ONEDNN_MAX_CPU_ISA
// (its kernels), so the theoretical figure is for the instructions that can run.
struct IsaLevel {
  Isa isa = Isa::portable;
  bool amx = false;    // AMX tiles allowed: the top level, with no cap excluding them
  std::string reason;  // what set the level, for the report
};
// ONEDNN_MAX_CPU_ISA's value as a cap ("AVX2" -> avx2, "AVX512_CORE_BF16" -> avx512 without
// AMX, "AVX512_CORE_AMX" / "ALL" -> no cap; on aarch64 "ADVANCED_SIMD" / "SVE_512" -> portable,
// the only level there); nullopt for a value it does not know.
std::optional<IsaLevel> parse_onednn_isa_cap(std::string_view value);
// From the environment: TRAINBENCH_MAX_ISA, and ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) when
// `onednn_cap` is set. An invalid TRAINBENCH_MAX_ISA is an InvalidArgument.
Status isa_level_from_environment(bool onednn_cap, IsaLevel* out);

// Operand 0: one fp64 per thread, the mean lane value of its accumulators. The probe runs at
// `level`: the AVX-512 kernels only at avx512, the AVX2 one at avx2, SSE2 at portable.
Status plan_peak(const PeakOp& op, const HostInventory& host, int threads, const IsaLevel& level,
                 std::unique_ptr<Plan>* out);

// The core clock with the fp32 probe of `level` running on all `threads` threads at once
// (see measure_clock_ghz in host_info.h).
double measure_clock_under_probe(Isa level, int threads);
std::string clock_method(Isa level, int threads);

struct PeakRates {
  double fp32_gflops = 0, bf16_gflops = 0;
  std::string model;   // the formula and its factors, for the report
  std::string basis;   // the table row (or assumption) the per-core rates come from
  std::string source;  // the row's source
};
// cores x fp32 (bf16) FLOP/cycle/core at the level x clock. `cores` counts physical cores
// among the threads used (SMT siblings share one core's FMA pipes), and may be fractional
// where a cgroup quota allows less than the cores' CPU time.
PeakRates theoretical_peak(const HostInventory& host, double cores, const IsaLevel& level,
                           double clock_ghz);

// The fp32 theoretical peak at every level this CPU runs, for a table of levels.
struct LevelPeak {
  Isa isa = Isa::portable;
  double fp32_gflops = 0;
  std::string formula;
};
std::vector<LevelPeak> fp32_peak_by_level(const HostInventory& host, double cores,
                                          double clock_ghz);

}  // namespace tb::cpu
