// The CPU kernels built with the baseline flags (SSE2 on x86-64; the compiler's default
// elsewhere): the portable table, which every CPU runs.
#define TB_ISA_NAMESPACE portable
#include "backends/cpu_kernels/vector_kernels_body.inc"

namespace tb::cpu::portable {

constinit const CpuKernels kKernels = make_kernels(Isa::portable);

}  // namespace tb::cpu::portable
