// Plain double-precision references the workloads validate against. Slow and obvious on
// purpose. Inputs are row-major / NCHW float arrays already rounded to the op's input dtype.
#pragma once

#include <cstdint>

#include "backends/ops.h"

namespace tb::cpu {

// A reference output and the scale its rounding error grows with: the sum of the absolute
// values of the terms that make it up. Tolerances are relative to that magnitude.
struct ReferenceValue {
  double value = 0;
  double magnitude = 0;
};

// Element (i, j) of batch `batch` of alpha * op(A) op(B) + beta * C0.
ReferenceValue gemm_reference(const GemmOp& op, const float* a, const float* b, const float* c0,
                              std::int64_t batch, std::int64_t i, std::int64_t j);

// Freivalds' probe: compares C x with alpha * A (B x) + beta * C0 x for a seeded random x,
// for every row of every batch; returns the largest |difference| / magnitude.
double gemm_freivalds_error(const GemmOp& op, const float* a, const float* b, const float* c0,
                            const float* c, std::uint64_t seed);

// One output element of each convolution direction (NCHW src / dst, OIHW weights).
ReferenceValue conv_forward_reference(const ConvOp& op, const float* src, const float* weights,
                                      std::int64_t n, std::int64_t oc, std::int64_t oh,
                                      std::int64_t ow);
ReferenceValue conv_backward_data_reference(const ConvOp& op, const float* diff_dst,
                                            const float* weights, std::int64_t n, std::int64_t ic,
                                            std::int64_t ih, std::int64_t iw);
ReferenceValue conv_backward_weights_reference(const ConvOp& op, const float* src,
                                               const float* diff_dst, std::int64_t oc,
                                               std::int64_t ic, std::int64_t kh, std::int64_t kw);

}  // namespace tb::cpu
