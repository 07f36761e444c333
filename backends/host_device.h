// TB_HOST_DEVICE marks a function that nvcc compiles for both the host and the device, so the
// CUDA kernels and the CPU (tests, shared code) run the same arithmetic.
#pragma once

#ifdef __CUDACC__
#define TB_HOST_DEVICE __host__ __device__
#else
#define TB_HOST_DEVICE
#endif

// TB_ALWAYS_INLINE marks a small shared formula that every caller inlines, at every
// optimization level, so no translation unit emits an out-of-line copy of it. The CPU kernels
// are compiled once per instruction set (backends/cpu_kernels/vector_kernels_body.inc): an inline
// function with external linkage that the AVX-512 build emitted would be a weak symbol, and
// the linker keeps one copy for the whole program, possibly that one.
#if defined(__GNUC__) || defined(__clang__)
#define TB_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define TB_ALWAYS_INLINE inline
#endif
