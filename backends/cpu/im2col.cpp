#include "backends/cpu/im2col.h"

#include <algorithm>
#include <cstdint>

namespace tb::cpu {

bool im2col_is_identity(const ConvOp& op) {
  return op.kh == 1 && op.kw == 1 && op.sh == 1 && op.sw == 1 && op.ph == 0 && op.pw == 0;
}

void im2col(const ConvOp& op, const float* image, float* col) {
  const std::int64_t oh = op.oh(), ow = op.ow(), rows = op.ic * op.kh * op.kw;
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t c = row / (op.kh * op.kw), i = row / op.kw % op.kh, j = row % op.kw;
    const float* plane = image + c * op.ih * op.iw;
    float* out = col + row * oh * ow;
    for (std::int64_t y = 0; y < oh; ++y) {
      const std::int64_t iy = y * op.sh - op.ph + i;
      float* out_row = out + y * ow;
      if (iy < 0 || iy >= op.ih) {
        std::fill(out_row, out_row + ow, 0.0f);
        continue;
      }
      const float* in_row = plane + iy * op.iw;
      for (std::int64_t x = 0; x < ow; ++x) {
        const std::int64_t ix = x * op.sw - op.pw + j;
        out_row[x] = ix >= 0 && ix < op.iw ? in_row[ix] : 0.0f;
      }
    }
  }
}

void col2im(const ConvOp& op, const float* col, float* image) {
  const std::int64_t oh = op.oh(), ow = op.ow();
  // One channel per thread: the rows of a channel only touch that channel's plane.
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < op.ic; ++c) {
    float* plane = image + c * op.ih * op.iw;
    for (std::int64_t i = 0; i < op.kh; ++i)
      for (std::int64_t j = 0; j < op.kw; ++j) {
        const float* in = col + ((c * op.kh + i) * op.kw + j) * oh * ow;
        for (std::int64_t y = 0; y < oh; ++y) {
          const std::int64_t iy = y * op.sh - op.ph + i;
          if (iy < 0 || iy >= op.ih) continue;
          float* out_row = plane + iy * op.iw;
          for (std::int64_t x = 0; x < ow; ++x) {
            const std::int64_t ix = x * op.sw - op.pw + j;
            if (ix >= 0 && ix < op.iw) out_row[ix] += in[y * ow + x];
          }
        }
      }
  }
}

}  // namespace tb::cpu
