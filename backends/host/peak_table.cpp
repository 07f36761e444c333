#include "backends/host/peak_table.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace tb::cpu {
namespace {

constexpr std::string_view kAmd = "AuthenticAMD", kIntel = "GenuineIntel";
// Arm rows: vendor is the MIDR implementer's name, family the implementer code and the model
// ranges the MIDR part numbers (CpuIdentity::implementer / part).
constexpr std::string_view kArm = "ARM", kArmAssumed = "ARM (assumed)";

// ---- AMD: family and model ranges as Linux and AMD's guides number them ----
// The FP unit of every Zen core has two FMA (and FMUL) pipes and two separate FADD pipes.

constexpr ModelRange kZen1[] = {{0x00, 0x2f}};  // family 17h: Naples, Summit / Pinnacle Ridge
constexpr ModelRange kZen2[] = {{0x30, 0xff}};  // 17h: Rome, Matisse, Renoir
constexpr ModelRange kZen3[] = {{0x00, 0x0f}, {0x20, 0x2f}, {0x40, 0x5f}};  // 19h: Milan, ...
constexpr ModelRange kZen4[] = {{0x10, 0x1f}, {0x60, 0x7f}, {0xa0, 0xaf}};  // Genoa, Bergamo
constexpr ModelRange kZen5Wide[] = {{0x00, 0x1f}, {0x40, 0x4f}};    // 1Ah: Turin, Granite Ridge
constexpr ModelRange kZen5Mobile[] = {{0x20, 0x2f}, {0x60, 0x6f}};  // Strix, Krackan Point

// ---- Intel family 6: model numbers as Linux's intel-family.h lists them ----

constexpr ModelRange kHaswell[] = {{0x3c, 0x3c}, {0x3f, 0x3f}, {0x45, 0x46}};
constexpr ModelRange kBroadwell[] = {{0x3d, 0x3d}, {0x47, 0x47}, {0x4f, 0x4f}, {0x56, 0x56}};
constexpr ModelRange kSkylakeClient[] = {
    {0x4e, 0x4e}, {0x5e, 0x5e}, {0x8e, 0x8e}, {0x9e, 0x9e}, {0xa5, 0xa6}};
constexpr ModelRange kSkylakeServer[] = {{0x55, 0x55}};  // Skylake-SP, Cascade, Cooper Lake
constexpr ModelRange kIceLakeServer[] = {{0x6a, 0x6a}, {0x6c, 0x6c}};
constexpr ModelRange kAvx512Client[] = {
    {0x7d, 0x7e}, {0x8c, 0x8d}, {0xa7, 0xa7}};  // Ice Lake, Tiger Lake, Rocket Lake
constexpr ModelRange kAmxServer[] = {
    {0x8f, 0x8f}, {0xcf, 0xcf}, {0xad, 0xae}};  // Sapphire, Emerald, Granite Rapids

// ---- Arm Neoverse, by MIDR part (implementer 0x41) ----

constexpr ModelRange kNeoverseN1[] = {{0xd0c, 0xd0c}};  // Graviton2, Ampere Altra
constexpr ModelRange kNeoverseV1[] = {{0xd40, 0xd40}};  // Graviton3
constexpr ModelRange kNeoverseN2[] = {{0xd49, 0xd49}};  // Azure Cobalt 100, Yitian 710
constexpr ModelRange kNeoverseV2[] = {{0xd4f, 0xd4f}};  // NVIDIA Grace, Graviton4

constexpr std::string_view kIntelManual =
    "Intel 64 and IA-32 Architectures Optimization Reference Manual (248966)";

// AMX: one 16x16x32 TDPBF16PS (16,384 FLOP) per 16 cycles per core.
constexpr int kAmxBf16 = 1024;

// BFMMLA multiplies a 2x4 by a 4x2 bf16 matrix into a 2x2 fp32 one per 128-bit segment: 16
// multiply-adds, 32 FLOP. The Neoverse V1, N2 and V2 software optimization guides issue it on
// every FP / SIMD pipe that runs FMLA, one a pipe a cycle (as LLVM's AArch64SchedNeoverse*.td
// model it): V1 and V2 4 x 128 bits a cycle (V1's SVE form, 256 bits on 2 pipes, the same),
// 128 FLOP/cycle; N2 2 x 128, 64; N1 has no BF16. Theoretical, unverified on hardware: the
// bfmmla probe measures what a core reaches.
constexpr int kBfmmla = 32;

constexpr PeakRow kRows[] = {
    {kAmd, 0x17, kZen1, 0, 255, "", "Zen / Zen+", 2, 128, true, false, 2, 0,
     "256-bit AVX2 ops split in two 128-bit halves",
     "AMD Software Optimization Guide for AMD Family 17h Processors (pub. 55723)"},
    {kAmd, 0x17, kZen2, 0, 255, "", "Zen 2", 2, 256, true, false, 2, 0, "",
     "AMD Software Optimization Guide for AMD Family 17h Models 30h and Greater (pub. 56305)"},
    {kAmd, 0x19, kZen3, 0, 255, "", "Zen 3", 2, 256, true, false, 2, 0, "",
     "AMD Software Optimization Guide for AMD Family 19h Processors (pub. 56665)"},
    {kAmd, 0x19, kZen4, 0, 255, "", "Zen 4", 2, 256, true, true, 2, 0,
     "512-bit ops double-pumped on the 256-bit pipes: AVX-512 adds no FLOP/cycle over AVX2",
     "Software Optimization Guide for the AMD Zen4 Microarchitecture (pub. 57647)"},
    {kAmd, 0x1a, kZen5Wide, 0, 255, "", "Zen 5 (server / desktop)", 2, 512, true, true, 2, 0,
     "the full 512-bit data path of EPYC 9005 and desktop parts; mobile Zen 5 double-pumps",
     "Software Optimization Guide for the AMD Zen5 Microarchitecture (pub. 58455)"},
    {kAmd, 0x1a, kZen5Mobile, 0, 255, "", "Zen 5 (mobile)", 2, 256, true, true, 2, 0,
     "256-bit data path: 512-bit ops double-pumped (the model ranges are an assumption)",
     "Software Optimization Guide for the AMD Zen5 Microarchitecture (pub. 58455)"},

    {kIntel, 6, kHaswell, 0, 255, "", "Haswell", 2, 256, true, false, 0, 0, "", kIntelManual},
    {kIntel, 6, kBroadwell, 0, 255, "", "Broadwell", 2, 256, true, false, 0, 0, "", kIntelManual},
    {kIntel, 6, kSkylakeClient, 0, 255, "", "Skylake (client) to Comet Lake", 2, 256, true, false,
     0, 0, "", kIntelManual},
    // Steppings 0-7: Skylake-SP (0-4) and Cascade Lake (5-7); 10-11 are Cooper Lake.
    {kIntel, 6, kSkylakeServer, 0, 7, "Gold 5122|Gold 5222", "Skylake-SP / Cascade Lake", 2, 512,
     true, true, 0, 0, "Gold 5122 and 5222 are the Gold 5xxx parts with the second FMA unit",
     "Intel ARK (# of AVX-512 FMA Units: 2); WikiChip"},
    {kIntel, 6, kSkylakeServer, 0, 7, "Xeon(R) Silver|Xeon(R) Bronze|Xeon(R) Gold 5###",
     "Skylake-SP / Cascade Lake, 1 FMA unit", 2, 256, true, true, 0, 0,
     "Silver, Bronze and Gold 5xxx SKUs lack the port-5 FMA unit: 512-bit ops only on the "
     "fused port 0+1 pair",
     "Intel ARK (# of AVX-512 FMA Units: 1); Intel 64 and IA-32 Architectures Optimization "
     "Reference Manual (248966)"},
    {kIntel, 6, kSkylakeServer, 0, 7, "", "Skylake-SP / Cascade Lake", 2, 512, true, true, 0, 0,
     "2 FMA units (fused port 0+1 and port 5) as Platinum and Gold 6xxx SKUs have; a model name "
     "that hides a 1-FMA SKU (a VM's) reads 2x too high",
     "Intel ARK (# of AVX-512 FMA Units: 2); Intel 64 and IA-32 Architectures Optimization "
     "Reference Manual (248966)"},
    {kIntel, 6, kSkylakeServer, 8, 255, "", "Cooper Lake", 2, 512, true, true, 0, 0, "",
     "Intel ARK (# of AVX-512 FMA Units: 2)"},
    {kIntel, 6, kIceLakeServer, 0, 255, "", "Ice Lake-SP", 2, 512, true, true, 0, 0,
     "every 3rd-generation Xeon Scalable SKU has 2 FMA units",
     "Intel ARK (# of AVX-512 FMA Units: 2); WikiChip"},
    {kIntel, 6, kAvx512Client, 0, 255, "", "Ice Lake / Tiger Lake / Rocket Lake (client)", 2, 256,
     true, true, 0, 0, "one 512-bit FMA (fused port 0+1): AVX-512 adds no FLOP/cycle over AVX2",
     kIntelManual},
    {kIntel, 6, kAmxServer, 0, 255, "", "Sapphire / Emerald / Granite Rapids", 2, 512, true, true,
     0, kAmxBf16,
     "AMX at 1024 bf16 FLOP/cycle/core (one 16x16x32 TDPBF16PS per 16 cycles) is an "
     "assumption from Intel's stated tile throughput",
     "Intel 64 and IA-32 Architectures Optimization Reference Manual (248966)"},

    // Arm: fma_pipes counts the 128-bit Advanced SIMD / FP pipes that execute FMLA; the bf16
    // figure is kBfmmla x the 128-bit BFMMLAs those pipes issue a cycle.
    {kArm, 0x41, kNeoverseN1, 0, 255, "", "Neoverse N1", 2, 128, false, false, 0, 0,
     "2 x 128-bit NEON FMA pipes (V0, V1); no SVE, no BF16",
     "Arm Neoverse N1 Software Optimization Guide"},
    {kArm, 0x41, kNeoverseV1, 0, 255, "", "Neoverse V1", 4, 128, false, false, 0, 4 * kBfmmla,
     "4 x 128-bit NEON FMA pipes, or 2 x 256-bit SVE: the same 32 fp32 FLOP/cycle either way; "
     "BFMMLA on all 4 (SVE's 256-bit one on 2): 4 x 128 bits a cycle",
     "Arm Neoverse V1 Software Optimization Guide"},
    {kArm, 0x41, kNeoverseN2, 0, 255, "", "Neoverse N2", 2, 128, false, false, 0, 2 * kBfmmla,
     "2 x 128-bit NEON / SVE (128-bit vectors) FMA pipes, BFMMLA on both",
     "Arm Neoverse N2 Software Optimization Guide"},
    {kArm, 0x41, kNeoverseV2, 0, 255, "", "Neoverse V2 (NVIDIA Grace, AWS Graviton4)", 4, 128,
     false, false, 0, 4 * kBfmmla,
     "4 x 128-bit NEON / SVE (128-bit vectors) FMA pipes, BFMMLA on all 4",
     "Arm Neoverse V2 Software Optimization Guide"},
};

bool in_ranges(std::span<const ModelRange> ranges, int model) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [model](ModelRange r) { return r.first <= model && model <= r.last; });
}

// Whether `text` contains one of `pattern`'s alternatives (separated by '|'), where '#' stands
// for any digit. Not std::regex: GCC 12 warns inside <regex> under the sanitizers' flags.
bool name_matches(std::string_view text, std::string_view pattern) {
  while (!pattern.empty()) {
    const std::size_t bar = pattern.find('|');
    const std::string_view alternative = pattern.substr(0, bar);
    for (std::size_t at = 0; at + alternative.size() <= text.size(); ++at) {
      std::size_t i = 0;
      while (i < alternative.size() &&
             (alternative[i] == '#' ? std::isdigit(static_cast<unsigned char>(text[at + i])) != 0
                                    : alternative[i] == text[at + i]))
        ++i;
      if (i == alternative.size()) return true;
    }
    pattern = bar == std::string_view::npos ? std::string_view() : pattern.substr(bar + 1);
  }
  return false;
}

bool matches(const PeakRow& row, const CpuIdentity& cpu) {
  if (row.vendor == kArm) return cpu.implementer == row.family && in_ranges(row.models, cpu.part);
  if (row.vendor != cpu.vendor || row.family != cpu.family || !in_ranges(row.models, cpu.model))
    return false;
  if (cpu.stepping >= 0 && (cpu.stepping < row.stepping_first || cpu.stepping > row.stepping_last))
    return false;
  return row.name_pattern.empty() || name_matches(cpu.model_name, row.name_pattern);
}

bool has_flag(const CpuIdentity& cpu, std::string_view flag) {
  return std::find(cpu.flags.begin(), cpu.flags.end(), flag) != cpu.flags.end();
}

// A CPU the table lacks: two FMA pipes of its widest vector width, what current x86 server
// cores have. Said to be an assumption wherever it is reported.
PeakRow assumed_row(const CpuIdentity& cpu) {
  PeakRow row;
  if (cpu.implementer >= 0 || has_flag(cpu, "asimd")) {
    row.vendor = kArmAssumed;
    row.microarchitecture = "not in the table";
    row.fma_pipes = 2;
    row.fma_bits = 128;
    row.note = "assumed: 2 x 128-bit NEON FMA pipes, what Neoverse N1 / N2 have";
    row.source = "none: an assumption";
    return row;
  }
  row.vendor = "";
  row.microarchitecture = "not in the table";
  row.fma_pipes = 2;
  row.avx2 = has_flag(cpu, "avx2") && has_flag(cpu, "fma");
  row.avx512 = has_flag(cpu, "avx512f");
  row.fma_bits = row.avx512 ? 512 : row.avx2 ? 256 : 128;
  row.matrix_bf16_per_cycle = has_flag(cpu, "amx_bf16") ? kAmxBf16 : 0;
  row.note =
      "assumed: 2 FMA pipes of the widest vector width the flags show, no separate add "
      "pipes; AMX as Sapphire Rapids";
  row.source = "none: an assumption from the ISA flags";
  return row;
}

std::string identity(const CpuIdentity& cpu) {
  if (cpu.implementer >= 0)
    return fmt::format("{} implementer {:#x} part {:#x} variant {} revision {}", cpu.vendor,
                       cpu.implementer, cpu.part, cpu.variant, cpu.revision);
  if (cpu.family < 0) return cpu.vendor.empty() ? "a non-x86 CPU" : cpu.vendor;
  return fmt::format("{} family {:#x} model {:#x} stepping {}", cpu.vendor, cpu.family, cpu.model,
                     cpu.stepping);
}

int bits_of(Isa level) {
  switch (level) {
    case Isa::portable:
      return 128;
    case Isa::avx2:
      return 256;
    case Isa::avx512:
      return 512;
  }
  return 128;
}

bool runs(const PeakRow& row, Isa level) {
  return level == Isa::portable || (level == Isa::avx2 && row.avx2) ||
         (level == Isa::avx512 && row.avx512);
}

}  // namespace

bool arm_row(const PeakRow& row) {
  return row.vendor == kArm || row.vendor == kArmAssumed;
}

std::span<const PeakRow> peak_table() {
  return kRows;
}

PeakSpec lookup_peak_spec(const CpuIdentity& cpu) {
  for (const PeakRow& row : kRows)
    if (matches(row, cpu))
      return {
          row, true,
          fmt::format("table row '{}' for {}{}", row.microarchitecture, identity(cpu),
                      row.name_pattern.empty()
                          ? ""
                          : fmt::format(" ('{}' matched '{}')", cpu.model_name, row.name_pattern))};
  return {assumed_row(cpu), false,
          fmt::format("no table row for {} ('{}'): an assumption from the ISA flags", identity(cpu),
                      cpu.model_name)};
}

double fp32_flops_per_cycle(const PeakRow& row, Isa level) {
  if (!runs(row, level)) return 0;
  if (arm_row(row)) return level == Isa::portable ? row.fma_pipes * row.fma_bits / 32 * 2.0 : 0;
  if (level == Isa::portable) {
    // SSE2 has no FMA: muls issue on the FMA pipes, adds on those or the add pipes.
    const int instructions = std::min(row.fma_pipes + row.add_pipes, 2 * row.fma_pipes);
    return instructions * 4.0;
  }
  // An op wider than its pipe occupies it for width / pipe-width cycles.
  const int lanes_per_cycle = row.fma_pipes * std::min(bits_of(level), row.fma_bits) / 32;
  return lanes_per_cycle * 2.0;
}

std::string fp32_formula(const PeakRow& row, Isa level) {
  if (!runs(row, level) || (arm_row(row) && level != Isa::portable))
    return fmt::format("{} does not run the {} level", row.microarchitecture, isa_name(level));
  if (arm_row(row))
    return fmt::format("{} x {}-bit FMA pipes (fmla): {} x {} lanes x 2 FLOP = {:g} FLOP/cycle",
                       row.fma_pipes, row.fma_bits, row.fma_pipes, row.fma_bits / 32,
                       fp32_flops_per_cycle(row, level));
  if (level == Isa::portable)
    return fmt::format(
        "SSE2 mul + add (no FMA): {} x 128-bit ops/cycle ({} FMA + {} add pipes, muls only on "
        "the FMA pipes) x 4 lanes x 1 FLOP = {:g} FLOP/cycle",
        std::min(row.fma_pipes + row.add_pipes, 2 * row.fma_pipes), row.fma_pipes, row.add_pipes,
        fp32_flops_per_cycle(row, level));
  const int bits = bits_of(level);
  if (bits > row.fma_bits)  // double-pumped: each op holds a pipe for bits / fma_bits cycles
    return fmt::format(
        "{} x {}-bit FMA pipes, each {}-bit op taking {} pipe-cycles: {} fp32 lanes/cycle x 2 "
        "FLOP = {:g} FLOP/cycle",
        row.fma_pipes, row.fma_bits, bits, bits / row.fma_bits, row.fma_pipes * row.fma_bits / 32,
        fp32_flops_per_cycle(row, level));
  return fmt::format(
      "{} x {}-bit FMA pipes running {}-bit ops: {} x {} lanes x 2 FLOP = {:g} "
      "FLOP/cycle",
      row.fma_pipes, row.fma_bits, bits, row.fma_pipes, bits / 32,
      fp32_flops_per_cycle(row, level));
}

double bf16_flops_per_cycle(const PeakRow& row, Isa level, bool has_bf16, bool use_amx) {
  if (arm_row(row)) return level == Isa::portable && has_bf16 ? row.matrix_bf16_per_cycle : 0;
  if (level != Isa::avx512) return 0;
  if (use_amx && row.matrix_bf16_per_cycle > 0) return row.matrix_bf16_per_cycle;
  return has_bf16 ? 2 * fp32_flops_per_cycle(row, Isa::avx512) : 0;
}

}  // namespace tb::cpu
