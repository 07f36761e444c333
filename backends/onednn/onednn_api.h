// The one place where oneDNN 2.x (Debian 12: 2.6) and 3.x (Debian 13: 3.7) differ for
// cpu-onednn: 3.x removed the operation descriptors (a primitive descriptor is made from the
// engine and the shapes at once), took the scale out of an eltwise post-op, and gives a GEMM's
// alpha as a scale at execution instead of an output scale. Every primitive descriptor of the
// backend is made here; nothing else in the backend tests the version.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "backends/host/caches.h"

namespace tb::onednn::api {

using dnnl::algorithm;
using dnnl::engine;
using dnnl::normalization_flags;
using dnnl::primitive_attr;
using dnnl::prop_kind;
using md = dnnl::memory::desc;
using dims = dnnl::memory::dims;

// Convolution; `bias` may be an empty desc (no bias). Padding is given left and right.
dnnl::convolution_forward::primitive_desc conv_forward(const engine& engine, prop_kind prop,
                                                       algorithm alg, const md& src,
                                                       const md& weights, const md& bias,
                                                       const md& dst, const dims& strides,
                                                       const dims& pad_left, const dims& pad_right,
                                                       const primitive_attr& attr);
dnnl::convolution_backward_data::primitive_desc conv_backward_data(
    const engine& engine, algorithm alg, const md& diff_src, const md& weights, const md& diff_dst,
    const dims& strides, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint);
dnnl::convolution_backward_weights::primitive_desc conv_backward_weights(
    const engine& engine, algorithm alg, const md& src, const md& diff_weights, const md& diff_dst,
    const dims& strides, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint);

// Batch and layer normalization on `data` (source and destination alike).
dnnl::batch_normalization_forward::primitive_desc batch_norm_forward(const engine& engine,
                                                                     prop_kind prop, const md& data,
                                                                     float epsilon,
                                                                     normalization_flags flags,
                                                                     const primitive_attr& attr);
dnnl::batch_normalization_backward::primitive_desc batch_norm_backward(
    const engine& engine, const md& data, float epsilon, normalization_flags flags,
    const primitive_attr& attr, const dnnl::batch_normalization_forward::primitive_desc& hint);
dnnl::layer_normalization_forward::primitive_desc layer_norm_forward(const engine& engine,
                                                                     prop_kind prop, const md& data,
                                                                     const md& stats, float epsilon,
                                                                     normalization_flags flags,
                                                                     const primitive_attr& attr);
dnnl::layer_normalization_backward::primitive_desc layer_norm_backward(
    const engine& engine, const md& data, const md& stats, float epsilon, normalization_flags flags,
    const primitive_attr& attr, const dnnl::layer_normalization_forward::primitive_desc& hint);

// Pooling without dilation.
dnnl::pooling_forward::primitive_desc pooling_forward(const engine& engine, prop_kind prop,
                                                      algorithm alg, const md& src, const md& dst,
                                                      const dims& strides, const dims& kernel,
                                                      const dims& pad_left, const dims& pad_right,
                                                      const primitive_attr& attr);
dnnl::pooling_backward::primitive_desc pooling_backward(
    const engine& engine, algorithm alg, const md& src, const md& dst, const dims& strides,
    const dims& kernel, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::pooling_forward::primitive_desc& hint);

// Element-wise on `data`; the backward's data is what `alg` differentiates from.
dnnl::eltwise_forward::primitive_desc eltwise_forward(const engine& engine, prop_kind prop,
                                                      algorithm alg, const md& data,
                                                      const primitive_attr& attr);
dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const engine& engine, algorithm alg, const md& data, const primitive_attr& attr,
    const dnnl::eltwise_forward::primitive_desc& hint);

dnnl::binary::primitive_desc binary(const engine& engine, algorithm alg, const md& src0,
                                    const md& src1, const md& dst, const primitive_attr& attr);

// Matmul (GEMM, fully connected), with `bias` (a [1, n] row added to every row of dst) unless it is
// empty.
dnnl::matmul::primitive_desc matmul(const engine& engine, const md& src, const md& weights,
                                    const md& dst, const primitive_attr& attr, const md& bias = {});

// The argument a batch norm backward takes its shift as: 2.x checks that it is given, 3.x
// refuses it (the backward does not read it): -1 there, OneDnnPlan::kNoArgument.
int batch_norm_backward_shift_arg();

// A descriptor's dimensions and type (3.x named the getters get_dims, get_data_type).
dims dims_of(const md& desc);
dnnl::memory::data_type data_type_of(const md& desc);

// A ReLU after the primitive.
void append_relu(dnnl::post_ops& post_ops);

// dst = alpha * (src x weights): 2.x takes alpha in the attributes; 3.x takes it at execution,
// as the weights' scale. Returns the execution argument that must hold alpha (an f32 scalar),
// or 0 where the attributes hold it.
int set_product_scale(primitive_attr& attr, float alpha);

// The dispatcher's level by name ("avx512_core_bf16", on AArch64 "sve_512"): the levels, and on
// AArch64 their codes, differ between versions.
std::string isa_name(dnnl::cpu_isa isa);

// How this oneDNN runs a low-precision type at its dispatcher's level here.
enum class LowPrecisionPath {
  native,       // the type's own instructions (AVX512_BF16, AVX512-FP16, AMX)
  converted,    // loaded through conversion instructions, computed in fp32 (AVX2-VNNI-2, 3.x)
  emulated,     // with integer AVX-512 instructions (bf16 on avx512_core)
  unavailable,  // not at all: `text` says which levels would run it
};
struct LowPrecisionSupport {
  LowPrecisionPath path = LowPrecisionPath::unavailable;
  // "native (avx512_core_bf16, oneDNN 3.7)", "unavailable: oneDNN 2.6 runs bf16 from ...".
  std::string text;
};
LowPrecisionSupport bf16_support();
LowPrecisionSupport f16_support();

// A fault of oneDNN `major`.`minor` that this CPU (by its CPUID) is known to meet, said for the
// device description and a crashed case's reason; empty where none is known. oneDNN 3.x before
// 3.8 reads an AMD CPU's L1 from leaf 0x8000001D unchecked: where the leaf describes no cache
// (some virtual machines', whose /sys then has no cache directory either) it takes a byte or
// so, and its brgemm convolution blocking divides by zero.
std::string known_fault(int major, int minor, const cpu::CpuidReader& cpuid);

// Where each element at `positions` (row-major over the desc's dims) lies in memory described by
// `desc`, in elements from its start, into `offsets`: oneDNN's blocked-layout formula (outer
// strides, inner blocks from the innermost out). False for a layout it does not describe (not
// blocked), a data type other than `plain`'s, or a `plain` that is not dense row-major (where a
// position is not a logical index): the caller then reorders the whole tensor.
bool blocked_offsets(const md& desc, const md& plain, std::span<const std::int64_t> positions,
                     std::vector<std::int64_t>* offsets);

}  // namespace tb::onednn::api
