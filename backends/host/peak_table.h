// Per-core vector throughput by CPU: the data behind the theoretical peak.
//
// Rows are keyed by vendor, family, model range (and stepping range and a model-name pattern
// where one model number covers parts with different FMA units, as Skylake-SP's 1-FMA Silver,
// Bronze and Gold 5xxx SKUs), and give the core's FMA pipes, their width and whether they run
// AVX-512 natively or in two halves, each row with its source. The table covers the server and
// desktop parts benchmarked for training; a CPU it does not list falls back to an assumption
// from its ISA flags, labelled as such.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "backends/host/host_info.h"
#include "backends/host/isa.h"

namespace tb::cpu {

struct ModelRange {
  int first = 0, last = 0;
};

struct PeakRow {
  std::string_view vendor;  // vendor_id: GenuineIntel, AuthenticAMD
  int family = 0;
  std::span<const ModelRange> models;
  int stepping_first = 0, stepping_last = 255;
  // Searched in `model name`: alternatives separated by '|', '#' any digit; empty: any CPU.
  std::string_view name_pattern;
  std::string_view microarchitecture;
  int fma_pipes = 0;    // fp32 FMA pipes per core
  int fma_bits = 0;     // native width of each pipe: 128, 256 or 512
  bool avx2 = false;    // runs AVX2 + FMA; on 128-bit pipes (Zen 1), in two halves
  bool avx512 = false;  // runs AVX-512; on pipes narrower than 512 bits, in two halves
  int add_pipes = 0;    // FP add pipes besides the FMA pipes (SSE2 mul + add uses them)
  // bf16 FLOP per cycle per core of the core's bf16 matrix instruction: AMX TDPBF16PS on x86,
  // BFMMLA on Arm; 0: none (or, on Arm, no sourced rate).
  int matrix_bf16_per_cycle = 0;
  std::string_view note;  // what the row assumes beyond its pipes
  std::string_view source;
};

// Every row, most specific first: the first row that matches a CPU describes it.
std::span<const PeakRow> peak_table();

// The row describing `cpu`, or the ISA-based assumption for a CPU the table lacks.
struct PeakSpec {
  PeakRow row;
  bool from_table = false;
  std::string basis;  // which row matched and why, or what was assumed
};
PeakSpec lookup_peak_spec(const CpuIdentity& cpu);

// fp32 FLOP per cycle per core at an ISA level: FMA pipes x lanes per pipe-cycle x 2 at avx2
// and avx512 (a 512-bit op on 256-bit pipes takes two pipe-cycles, so Zen 4 reaches the same
// rate as with AVX2); at portable (SSE2, no FMA) one mul or add per pipe-cycle on 4 lanes,
// the adds also on the separate add pipes. 0 where the core cannot run the level.
double fp32_flops_per_cycle(const PeakRow& row, Isa level);
// The factors of fp32_flops_per_cycle, in words, for the report.
std::string fp32_formula(const PeakRow& row, Isa level);

// Whether the row is an Arm one (from the table or assumed).
bool arm_row(const PeakRow& row);

// bf16 FLOP per cycle per core. x86: AMX tiles where allowed and present, else vdpbf16ps (two
// bf16 products per fp32 lane at the 512-bit FMA rate: twice the fp32 rate) where `has_bf16`
// (avx512_bf16), else 0; both need the avx512 level. Arm: the row's BFMMLA rate where
// `has_bf16` (FEAT_BF16), at the portable level; `use_amx` is not read.
double bf16_flops_per_cycle(const PeakRow& row, Isa level, bool has_bf16, bool use_amx);

}  // namespace tb::cpu
