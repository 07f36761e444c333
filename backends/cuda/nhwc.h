// Channels-last (NHWC) activations on the cuda backend: which ops keep them, where an element
// sits, and NCHW <-> NHWC conversions for plans whose callers exchange plain NCHW data.
// Device-independent: the index functions are the ones the kernels use.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/host_device.h"
#include "backends/ops.h"

namespace tb::cuda {

// 16-bit 4-D activations are channels-last unless the caller asks for plain NCHW: cuDNN's
// Tensor Core convolutions run natively on NHWC (on NCHW they transpose inside), and a
// network's batch norm, pooling and element-wise ops then follow its layout so nothing is
// reordered between layers. fp32 and tf32 stay NCHW. Layout::any (a single-op benchmark) and
// Layout::native (a network's step) choose alike; Layout::plain is NCHW.
inline bool channels_last(DType dtype, Layout layout) {
  return layout != Layout::plain && (dtype == DType::bf16 || dtype == DType::f16);
}

// The shape of a 4-D activation [n, c, h, w] in either layout.
struct ActivationShape {
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  bool nhwc = false;

  TB_HOST_DEVICE std::int64_t offset(std::int64_t i, std::int64_t k, std::int64_t y,
                                     std::int64_t x) const {
    return nhwc ? ((i * h + y) * w + x) * c + k : ((i * c + k) * h + y) * w + x;
  }
  // The channel of the element stored at `offset`.
  TB_HOST_DEVICE std::int64_t channel(std::int64_t offset) const {
    return nhwc ? offset % c : offset / (h * w) % c;
  }
  // Coordinates of the element stored at `offset`.
  struct Coordinates {
    std::int64_t n, c, y, x;
  };
  TB_HOST_DEVICE Coordinates coordinates(std::int64_t offset) const {
    if (nhwc) return {offset / (h * w * c), offset % c, offset / (w * c) % h, offset / c % w};
    return {offset / (c * h * w), offset / (h * w) % c, offset / w % h, offset % w};
  }
};

// Copies `element` (1, 2, 4 or 8) bytes per value between plain [n, c, h, w] and [n, h, w, c],
// in the direction `to_nhwc` says, on every thread (nhwc.cpp). A convolution's weights
// [K, C, R, S] convert the same way (KRSC).
void convert_channels(const void* src, void* dst, std::int64_t n, std::int64_t c, std::int64_t h,
                      std::int64_t w, std::size_t element, bool to_nhwc);
inline void nchw_to_nhwc(const void* src, void* dst, std::int64_t n, std::int64_t c, std::int64_t h,
                         std::int64_t w, std::size_t element) {
  convert_channels(src, dst, n, c, h, w, element, /*to_nhwc=*/true);
}
inline void nhwc_to_nchw(const void* src, void* dst, std::int64_t n, std::int64_t c, std::int64_t h,
                         std::int64_t w, std::size_t element) {
  convert_channels(src, dst, n, c, h, w, element, /*to_nhwc=*/false);
}

}  // namespace tb::cuda
