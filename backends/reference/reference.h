// What the workloads validate with: the error scale of an f64 reference value, GEMM with its
// beta C0, and the Freivalds probes. Each output element's f64 value comes from
// backends/product_reference.h. Inputs are row-major / NCHW float arrays already rounded to the
// op's input dtype.
#pragma once

#include <cstdint>

#include "backends/ops.h"

namespace tb::cpu {

// A reference output and what its rounding error grows with: the sum of the squares of the
// terms that make it up (their L2 norm, squared). Validation's rule that turns it into an
// error scale is written once, in workloads/workload.cpp (error_model).
struct ReferenceValue {
  double value = 0;
  double squares = 0;
};

// The scale an output's error is measured in: accumulation x ||terms||_2 + output x |value|.
// The two units come from validation's rule (workloads/workload.cpp).
struct ErrorScale {
  double accumulation = 0;  // relative to the L2 norm of the terms
  double output = 0;        // relative to the value (the rounding to the output dtype)
  double of(double squares, double value) const;
  // |got - want| in units of the scale (infinite for a NaN).
  double error(double got, const ReferenceValue& want) const;
};

// Element (i, j) of batch `batch` of alpha * op(A) op(B) + beta * C0.
ReferenceValue gemm_reference(const GemmOp& op, const float* a, const float* b, const float* c0,
                              std::int64_t batch, std::int64_t i, std::int64_t j);

// Freivalds' probe, grouped: the columns of C are split into `groups` contiguous groups and
// each row's residual sum_{j in g} x_j (C - alpha op(A) op(B) - beta C0)_ij, with a seeded
// x_j = +-1, is measured against the same sum's own error scale: the accumulation's part
// combined as sqrt(sum_{j in g} of the squared element parts), computed exactly as
// (A.A)((B.B)(x.x)) in O(mk + kn) per group, and the output rounding's (bounded, not random)
// as sum_{j in g} |c_ij| times its unit.
// With groups == n every element is compared with its fp64 reference. Returns the largest
// residual in units of its scale. Cost: about 2 batch m k groups + 2 batch k n multiply-adds.
// Detection limit: one element off by e element scales moves its group's residual by about
// e / sqrt(n / groups) group scales.
double gemm_probe_error(const GemmOp& op, const float* a, const float* b, const float* c0,
                        const double* c, std::int64_t groups, const ErrorScale& scale,
                        std::uint64_t seed);

// Each convolution direction as batches of GEMMs, out[b](r, c) = sum_s L[b](r, s) R[b](s, c):
// forward per image oc x (oh ow) over (ic kh kw); backward data per image ic x (ih iw) over
// (oc kh kw); backward weights once, oc x (ic kh kw) over (mb oh ow).
struct ConvAsGemm {
  std::int64_t batches = 1, rows = 1, columns = 1, inner = 1;
};
ConvAsGemm conv_as_gemm(const ConvOp& op);

// gemm_probe_error for a convolution seen as conv_as_gemm: in0 / in1 are the direction's
// inputs (src, weights / diff_dst, weights / src, diff_dst), bias the forward epilogue's
// (nullptr for none; a ReLU after it makes the output non-linear and is not probed), out the
// output in its plain layout. Cost: about 2 batches rows inner groups multiply-adds plus one
// pass over the implicit im2col matrix R.
double conv_probe_error(const ConvOp& op, const float* in0, const float* in1, const float* bias,
                        const double* out, std::int64_t groups, const ErrorScale& scale,
                        std::uint64_t seed);

}  // namespace tb::cpu
