// STREAM's per-element arithmetic, shared by the CUDA kernels and the CPU tests. Multiplies and
// adds are rounded one at a time on the device (no fused multiply-add), so results match a
// host replay bit for bit.
#pragma once

#include "backends/host_device.h"
#include "backends/ops.h"

namespace tb::cuda {

TB_HOST_DEVICE inline double multiply(double x, double y) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(x, y);
#else
  return x * y;
#endif
}

TB_HOST_DEVICE inline double add(double x, double y) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(x, y);
#else
  return x + y;
#endif
}

// The value a STREAM kernel writes at one index (dot: the product it adds up).
TB_HOST_DEVICE inline double stream_element(StreamKernel kernel, double a, double b, double c,
                                            double scalar) {
  switch (kernel) {
    case StreamKernel::copy:
      return a;  // c = a
    case StreamKernel::scale:
      return multiply(scalar, c);  // b = s c
    case StreamKernel::add:
      return add(a, b);  // c = a + b
    case StreamKernel::triad:
      return add(b, multiply(scalar, c));  // a = b + s c
    case StreamKernel::dot:
      return multiply(a, b);  // sum of a b
  }
  return 0;
}

// Grid size for a grid-stride kernel: enough resident blocks to fill every multiprocessor,
// never more blocks than there is work for.
TB_HOST_DEVICE inline long long stream_grid(long long pairs, int multiprocessors,
                                            int threads_per_block, int blocks_per_multiprocessor) {
  const long long full = static_cast<long long>(multiprocessors) * blocks_per_multiprocessor;
  const long long needed = (pairs + threads_per_block - 1) / threads_per_block;
  return needed < 1 ? 1 : (needed < full ? needed : full);
}

}  // namespace tb::cuda
