// im2col / col2im for one image of a 2-D convolution (NCHW), the lowering that turns a
// convolution into one GEMM per image. The column matrix is (ic*kh*kw) x (oh*ow), row-major:
// row (c*kh + i)*kw + j holds the input pixels that kernel tap (c, i, j) meets. The loops are
// the kernel table's (vector_kernels.h): the caller passes the level its plan chose.
#pragma once

#include "backends/cpu_kernels/vector_kernels.h"
#include "backends/ops.h"

namespace tb::cpu {

// True when the column matrix is the image itself (1x1 kernel, stride 1, no padding).
bool im2col_is_identity(const ConvOp& op);

// image: ic x ih x iw; col: (ic*kh*kw) x (oh*ow). Padding reads as zero.
void im2col(const CpuKernels& kernels, const ConvOp& op, const float* image, float* col);

// The adjoint: adds every column entry back onto the pixel it came from. `image` must be
// zeroed by the caller.
void col2im(const CpuKernels& kernels, const ConvOp& op, const float* col, float* image);

}  // namespace tb::cpu
