// NCHW <-> NHWC on the host, for plans that keep 4-D operands channels-last (cuDNN's fastest
// layout for 16-bit Tensor Core convolutions) while callers exchange plain NCHW data. A
// convolution's weights [K, C, R, S] convert the same way (to KRSC). Device-independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tb::cuda {

// Copies `element` bytes per value between plain [n, c, h, w] and [n, h, w, c], in the
// direction `to_nhwc` says.
inline void convert_channels(const void* src, void* dst, std::int64_t n, std::int64_t c,
                             std::int64_t h, std::int64_t w, std::size_t element, bool to_nhwc) {
  const auto* from = static_cast<const unsigned char*>(src);
  auto* to = static_cast<unsigned char*>(dst);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < c; ++k)
      for (std::int64_t p = 0; p < h * w; ++p) {
        const std::int64_t nchw = (i * c + k) * h * w + p, nhwc = (i * h * w + p) * c + k;
        std::memcpy(to + (to_nhwc ? nhwc : nchw) * element,
                    from + (to_nhwc ? nchw : nhwc) * element, element);
      }
}
inline void nchw_to_nhwc(const void* src, void* dst, std::int64_t n, std::int64_t c, std::int64_t h,
                         std::int64_t w, std::size_t element) {
  convert_channels(src, dst, n, c, h, w, element, /*to_nhwc=*/true);
}
inline void nhwc_to_nchw(const void* src, void* dst, std::int64_t n, std::int64_t c, std::int64_t h,
                         std::int64_t w, std::size_t element) {
  convert_channels(src, dst, n, c, h, w, element, /*to_nhwc=*/false);
}

}  // namespace tb::cuda
