// The instruction-set levels trainbench's own CPU kernels are built for, and the one chosen
// at run time: the best the CPU has, capped by TRAINBENCH_MAX_ISA so one host can run (and
// test) every lower variant, as ONEDNN_MAX_CPU_ISA caps oneDNN's dispatcher.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/status.h"

namespace tb::cpu {

// x86-64 levels as the psABI names them: portable is the baseline build (SSE2 on x86-64, the
// compiler's default on other architectures), avx2 is x86-64-v3 (AVX2, FMA, F16C, BMI2),
// avx512 is x86-64-v4 (AVX-512 F, BW, CD, DQ, VL). Ordered: a higher level runs every lower.
enum class Isa { portable = 0, avx2 = 1, avx512 = 2 };

std::string_view isa_name(Isa isa);
std::optional<Isa> parse_isa(std::string_view name);  // "portable", "avx2", "avx512"
// Every level this CPU runs, ascending (portable always).
std::vector<Isa> supported_isas();
bool isa_supported(Isa isa);
// The best supported level, capped by `cap` (TRAINBENCH_MAX_ISA's value; empty: no cap).
// A cap that names no level is an InvalidArgument naming the accepted values.
Status choose_isa(std::string_view cap, Isa* out);
// choose_isa with the environment's TRAINBENCH_MAX_ISA.
Status isa_from_environment(Isa* out);

}  // namespace tb::cpu
