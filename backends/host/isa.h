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

// 64-bit Arm: the levels above stay x86 ones, and on aarch64 only portable is built (the
// compiler's armv8-a default, whose Advanced SIMD (NEON) every aarch64 CPU has). What the CPU
// runs beyond that decides the peak probes (peak.h) and is reported in the inventory.
struct ArmFeatures {
  bool asimd = false, sve = false, sve2 = false, bf16 = false, i8mm = false, sve_bf16 = false;
  int sve_vector_bits = 0;  // prctl(PR_SVE_GET_VL) x 8; 0: no SVE or not known
  std::string source;       // "AT_HWCAP/AT_HWCAP2", "/proc/cpuinfo Features", or empty: none
  // The features as /proc/cpuinfo names them, in a fixed order.
  std::vector<std::string> names() const;
};
// From the auxiliary vector's bits (Linux arch/arm64/include/uapi/asm/hwcap.h), pure.
ArmFeatures arm_features_from_hwcap(unsigned long hwcap, unsigned long hwcap2);
// From /proc/cpuinfo's `Features` words, pure.
ArmFeatures arm_features_from_flags(const std::vector<std::string>& flags);
// This process's CPU: getauxval on aarch64 (with the SVE vector length); none elsewhere.
ArmFeatures host_arm_features();

}  // namespace tb::cpu
