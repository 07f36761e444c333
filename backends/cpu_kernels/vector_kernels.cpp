#include "backends/cpu_kernels/vector_kernels.h"

namespace tb::cpu {

const CpuKernels& cpu_kernels([[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::avx512) return avx512::kKernels;
  if (isa == Isa::avx2) return avx2::kKernels;
#endif
  return portable::kKernels;
}

Status kernels_from_environment(const CpuKernels** out) {
  Isa isa = Isa::portable;
  if (Status status = isa_from_environment(&isa); !status.ok()) return status;
  *out = &cpu_kernels(isa);
  return Status::Ok();
}

bool is_reference_level(const CpuKernels& kernels) {
  return kernels.isa == Isa::portable && supported_isas().size() > 1;
}

}  // namespace tb::cpu
