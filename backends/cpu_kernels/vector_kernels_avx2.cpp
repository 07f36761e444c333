// The CPU kernels built for x86-64-v3 (AVX2, FMA, F16C, BMI2): backends/cpu_kernels/CMakeLists.txt
// compiles this file, and only this one, with -march=x86-64-v3.
#if !defined(__AVX2__) || !defined(__FMA__)
#error "vector_kernels_avx2.cpp must be compiled with -march=x86-64-v3"
#endif

#define TB_ISA_NAMESPACE avx2
#include "backends/cpu_kernels/vector_kernels_body.inc"

namespace tb::cpu::avx2 {

constinit const CpuKernels kKernels = make_kernels(Isa::avx2);

}  // namespace tb::cpu::avx2
