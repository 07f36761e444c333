// TB_HOST_DEVICE marks a function that nvcc compiles for both the host and the device, so the
// CUDA kernels and the CPU (tests, shared code) run the same arithmetic.
#pragma once

#ifdef __CUDACC__
#define TB_HOST_DEVICE __host__ __device__
#else
#define TB_HOST_DEVICE
#endif
