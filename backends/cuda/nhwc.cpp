#include "backends/cuda/nhwc.h"

#include <stdexcept>

namespace tb::cuda {
namespace {

// One (image, channel) plane per iteration: its pixels are contiguous in NCHW and `c` apart
// in NHWC.
template <typename T>
void convert_planes(const T* from, T* to, std::int64_t n, std::int64_t c, std::int64_t plane,
                    bool to_nhwc) {
  const std::int64_t planes = n * c;
#pragma omp parallel for schedule(static) if (planes * plane > (std::int64_t{1} << 16))
  for (std::int64_t ik = 0; ik < planes; ++ik) {
    const std::int64_t i = ik / c, k = ik % c;
    const std::int64_t nchw = ik * plane, nhwc = i * plane * c + k;
    for (std::int64_t p = 0; p < plane; ++p) {
      if (to_nhwc)
        to[nhwc + p * c] = from[nchw + p];
      else
        to[nchw + p] = from[nhwc + p * c];
    }
  }
}

}  // namespace

void convert_channels(const void* src, void* dst, std::int64_t n, std::int64_t c, std::int64_t h,
                      std::int64_t w, std::size_t element, bool to_nhwc) {
  const std::int64_t plane = h * w;
  switch (element) {
    case 1:
      return convert_planes(static_cast<const std::uint8_t*>(src), static_cast<std::uint8_t*>(dst),
                            n, c, plane, to_nhwc);
    case 2:
      return convert_planes(static_cast<const std::uint16_t*>(src),
                            static_cast<std::uint16_t*>(dst), n, c, plane, to_nhwc);
    case 4:
      return convert_planes(static_cast<const std::uint32_t*>(src),
                            static_cast<std::uint32_t*>(dst), n, c, plane, to_nhwc);
    case 8:
      return convert_planes(static_cast<const std::uint64_t*>(src),
                            static_cast<std::uint64_t*>(dst), n, c, plane, to_nhwc);
    default:
      throw std::logic_error("convert_channels: elements of 1, 2, 4 or 8 bytes");
  }
}

}  // namespace tb::cuda
