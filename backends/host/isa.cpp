#include "backends/host/isa.h"

#include <algorithm>
#include <cstdlib>

#if defined(__aarch64__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <fmt/format.h>

namespace tb::cpu {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::portable:
      return "portable";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "unknown";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512})
    if (name == isa_name(isa)) return isa;
  return std::nullopt;
}

#if defined(__x86_64__)
namespace {
// F16C from CPUID (leaf 1, ECX bit 29): clang's __builtin_cpu_supports does not know it.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}
}  // namespace
#endif

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::portable:
      return true;
#if defined(__x86_64__)
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c() &&
             __builtin_cpu_supports("bmi2");
    case Isa::avx512:
      return isa_supported(Isa::avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#endif
    default:
      return false;
  }
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512})
    if (isa_supported(isa)) isas.push_back(isa);
  return isas;
}

Status choose_isa(std::string_view cap, Isa* out) {
  Isa limit = Isa::avx512;
  if (!cap.empty()) {
    const std::optional<Isa> parsed = parse_isa(cap);
    if (!parsed)
      return Status::InvalidArgument(
          fmt::format("TRAINBENCH_MAX_ISA={} names no level: use portable, avx2 or avx512", cap));
    limit = *parsed;
  }
  *out = Isa::portable;
  for (Isa isa : supported_isas())
    if (isa <= limit) *out = isa;
  return Status::Ok();
}

Status isa_from_environment(Isa* out) {
  const char* cap = std::getenv("TRAINBENCH_MAX_ISA");
  return choose_isa(cap ? cap : "", out);
}

std::vector<std::string> ArmFeatures::names() const {
  std::vector<std::string> out;
  const std::pair<bool, const char*> all[] = {{asimd, "asimd"}, {sve, "sve"},
                                              {sve2, "sve2"},   {bf16, "bf16"},
                                              {i8mm, "i8mm"},   {sve_bf16, "svebf16"}};
  for (const auto& [present, name] : all)
    if (present) out.emplace_back(name);
  return out;
}

ArmFeatures arm_features_from_hwcap(unsigned long hwcap, unsigned long hwcap2) {
  // Bit numbers of Linux's arm64 uapi hwcap.h (stable ABI).
  constexpr unsigned long kAsimd = 1UL << 1, kSve = 1UL << 22;
  constexpr unsigned long kSve2 = 1UL << 1, kSveBf16 = 1UL << 12, kI8mm = 1UL << 13,
                          kBf16 = 1UL << 14;
  ArmFeatures f;
  f.asimd = hwcap & kAsimd;
  f.sve = hwcap & kSve;
  f.sve2 = hwcap2 & kSve2;
  f.sve_bf16 = hwcap2 & kSveBf16;
  f.i8mm = hwcap2 & kI8mm;
  f.bf16 = hwcap2 & kBf16;
  f.source = "AT_HWCAP/AT_HWCAP2";
  return f;
}

ArmFeatures arm_features_from_flags(const std::vector<std::string>& flags) {
  auto has = [&](std::string_view name) {
    return std::find(flags.begin(), flags.end(), name) != flags.end();
  };
  ArmFeatures f;
  f.asimd = has("asimd");
  f.sve = has("sve");
  f.sve2 = has("sve2");
  f.bf16 = has("bf16");
  f.i8mm = has("i8mm");
  f.sve_bf16 = has("svebf16");
  if (f.asimd || f.sve) f.source = "/proc/cpuinfo Features";
  return f;
}

ArmFeatures host_arm_features() {
#if defined(__aarch64__)
  ArmFeatures f = arm_features_from_hwcap(getauxval(AT_HWCAP), getauxval(AT_HWCAP2));
#if defined(PR_SVE_GET_VL)
  if (f.sve) {
    const int vl = prctl(PR_SVE_GET_VL);
    if (vl > 0) f.sve_vector_bits = (vl & 0xffff) * 8;  // PR_SVE_VL_LEN_MASK: bytes
  }
#endif
  return f;
#else
  return {};
#endif
}

}  // namespace tb::cpu
