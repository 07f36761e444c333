#include "backends/cpu_kernels/im2col.h"

namespace tb::cpu {
namespace {

ConvShape conv_shape(const ConvOp& op) {
  return {op.ic, op.ih, op.iw, op.oh(), op.ow(), op.kh, op.kw, op.sh, op.sw, op.ph, op.pw};
}

}  // namespace

bool im2col_is_identity(const ConvOp& op) {
  return op.kh == 1 && op.kw == 1 && op.sh == 1 && op.sw == 1 && op.ph == 0 && op.pw == 0;
}

void im2col(const CpuKernels& kernels, const ConvOp& op, const float* image, float* col) {
  kernels.im2col_f32(conv_shape(op), image, col);
}

void col2im(const CpuKernels& kernels, const ConvOp& op, const float* col, float* image) {
  kernels.col2im_f32(conv_shape(op), col, image);
}

}  // namespace tb::cpu
