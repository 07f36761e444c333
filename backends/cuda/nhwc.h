// NCHW <-> NHWC on the host, for plans that keep 4-D operands channels-last (cuDNN's fastest
// layout for 16-bit Tensor Core convolutions) while callers exchange plain NCHW data. A
// convolution's weights [K, C, R, S] convert the same way (to KRSC). Device-independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tb::cuda {

// Copies `element` bytes per value from plain [n, c, h, w] to [n, h, w, c], or back.
inline void nchw_to_nhwc(const void* src, void* dst, std::int64_t n, std::int64_t c, std::int64_t h,
                         std::int64_t w, std::size_t element) {
  const auto* from = static_cast<const unsigned char*>(src);
  auto* to = static_cast<unsigned char*>(dst);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < c; ++k)
      for (std::int64_t p = 0; p < h * w; ++p)
        std::memcpy(to + ((i * h * w + p) * c + k) * element,
                    from + ((i * c + k) * h * w + p) * element, element);
}
inline void nhwc_to_nchw(const void* src, void* dst, std::int64_t n, std::int64_t c, std::int64_t h,
                         std::int64_t w, std::size_t element) {
  const auto* from = static_cast<const unsigned char*>(src);
  auto* to = static_cast<unsigned char*>(dst);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < c; ++k)
      for (std::int64_t p = 0; p < h * w; ++p)
        std::memcpy(to + ((i * c + k) * h * w + p) * element,
                    from + ((i * h * w + p) * c + k) * element, element);
}

}  // namespace tb::cuda
