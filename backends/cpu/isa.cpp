#include "backends/cpu/isa.h"

#include <cstdlib>

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

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::portable:
      return true;
#if defined(__x86_64__)
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
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

}  // namespace tb::cpu
