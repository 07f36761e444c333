#include "backends/onednn/onednn_api.h"

#include <cstdlib>

#include <fmt/format.h>

namespace tb::onednn::api {

// Each function: the 3.x way, then the 2.x way (an operation descriptor, then the primitive
// descriptor).

dnnl::convolution_forward::primitive_desc conv_forward(const engine& engine, prop_kind prop,
                                                       algorithm alg, const md& src,
                                                       const md& weights, const md& bias,
                                                       const md& dst, const dims& strides,
                                                       const dims& pad_left, const dims& pad_right,
                                                       const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  if (bias.is_zero())
    return {engine, prop, alg, src, weights, dst, strides, pad_left, pad_right, attr};
  return {engine, prop, alg, src, weights, bias, dst, strides, pad_left, pad_right, attr};
#else
  using desc = dnnl::convolution_forward::desc;
  return {bias.is_zero() ? desc(prop, alg, src, weights, dst, strides, pad_left, pad_right)
                         : desc(prop, alg, src, weights, bias, dst, strides, pad_left, pad_right),
          attr, engine};
#endif
}

dnnl::convolution_backward_data::primitive_desc conv_backward_data(
    const engine& engine, algorithm alg, const md& diff_src, const md& weights, const md& diff_dst,
    const dims& strides, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, alg, diff_src, weights, diff_dst, strides, pad_left, pad_right, hint, attr};
#else
  return {dnnl::convolution_backward_data::desc(alg, diff_src, weights, diff_dst, strides, pad_left,
                                                pad_right),
          attr, engine, hint};
#endif
}

dnnl::convolution_backward_weights::primitive_desc conv_backward_weights(
    const engine& engine, algorithm alg, const md& src, const md& diff_weights, const md& diff_dst,
    const dims& strides, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, alg, src, diff_weights, diff_dst, strides, pad_left, pad_right, hint, attr};
#else
  return {dnnl::convolution_backward_weights::desc(alg, src, diff_weights, diff_dst, strides,
                                                   pad_left, pad_right),
          attr, engine, hint};
#endif
}

dnnl::batch_normalization_forward::primitive_desc batch_norm_forward(const engine& engine,
                                                                     prop_kind prop, const md& data,
                                                                     float epsilon,
                                                                     normalization_flags flags,
                                                                     const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, prop, data, data, epsilon, flags, attr};
#else
  return {dnnl::batch_normalization_forward::desc(prop, data, epsilon, flags), attr, engine};
#endif
}

dnnl::batch_normalization_backward::primitive_desc batch_norm_backward(
    const engine& engine, const md& data, float epsilon, normalization_flags flags,
    const primitive_attr& attr, const dnnl::batch_normalization_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, prop_kind::backward, data, data, data, epsilon, flags, hint, attr};
#else
  return {dnnl::batch_normalization_backward::desc(prop_kind::backward, data, data, epsilon, flags),
          attr, engine, hint};
#endif
}

dnnl::layer_normalization_forward::primitive_desc layer_norm_forward(const engine& engine,
                                                                     prop_kind prop, const md& data,
                                                                     const md& stats, float epsilon,
                                                                     normalization_flags flags,
                                                                     const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, prop, data, data, stats, epsilon, flags, attr};
#else
  return {dnnl::layer_normalization_forward::desc(prop, data, stats, epsilon, flags), attr, engine};
#endif
}

dnnl::layer_normalization_backward::primitive_desc layer_norm_backward(
    const engine& engine, const md& data, const md& stats, float epsilon, normalization_flags flags,
    const primitive_attr& attr, const dnnl::layer_normalization_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, prop_kind::backward, data, data, data, stats, epsilon, flags, hint, attr};
#else
  return {dnnl::layer_normalization_backward::desc(prop_kind::backward, data, data, stats, epsilon,
                                                   flags),
          attr, engine, hint};
#endif
}

dnnl::pooling_forward::primitive_desc pooling_forward(const engine& engine, prop_kind prop,
                                                      algorithm alg, const md& src, const md& dst,
                                                      const dims& strides, const dims& kernel,
                                                      const dims& pad_left, const dims& pad_right,
                                                      const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  const dims no_dilation(strides.size(), 0);
  return {engine, prop, alg, src, dst, strides, kernel, no_dilation, pad_left, pad_right, attr};
#else
  return {dnnl::pooling_forward::desc(prop, alg, src, dst, strides, kernel, pad_left, pad_right),
          attr, engine};
#endif
}

dnnl::pooling_backward::primitive_desc pooling_backward(
    const engine& engine, algorithm alg, const md& src, const md& dst, const dims& strides,
    const dims& kernel, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::pooling_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  const dims no_dilation(strides.size(), 0);
  return {engine, alg, src, dst, strides, kernel, no_dilation, pad_left, pad_right, hint, attr};
#else
  return {dnnl::pooling_backward::desc(alg, src, dst, strides, kernel, pad_left, pad_right), attr,
          engine, hint};
#endif
}

dnnl::eltwise_forward::primitive_desc eltwise_forward(const engine& engine, prop_kind prop,
                                                      algorithm alg, const md& data,
                                                      const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, prop, alg, data, data, 0.f, 0.f, attr};
#else
  return {dnnl::eltwise_forward::desc(prop, alg, data, 0.f, 0.f), attr, engine};
#endif
}

dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const engine& engine, algorithm alg, const md& data, const primitive_attr& attr,
    const dnnl::eltwise_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, alg, data, data, data, 0.f, 0.f, hint, attr};
#else
  return {dnnl::eltwise_backward::desc(alg, data, data, 0.f, 0.f), attr, engine, hint};
#endif
}

dnnl::binary::primitive_desc binary(const engine& engine, algorithm alg, const md& src0,
                                    const md& src1, const md& dst, const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, alg, src0, src1, dst, attr};
#else
  return {dnnl::binary::desc(alg, src0, src1, dst), attr, engine};
#endif
}

dnnl::matmul::primitive_desc matmul(const engine& engine, const md& src, const md& weights,
                                    const md& dst, const primitive_attr& attr, const md& bias) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, src, weights, bias, dst, attr};
#else
  return {bias.is_zero() ? dnnl::matmul::desc(src, weights, dst)
                         : dnnl::matmul::desc(src, weights, bias, dst),
          attr, engine};
#endif
}

int batch_norm_backward_shift_arg() {
#if DNNL_VERSION_MAJOR >= 3
  return -1;
#else
  return DNNL_ARG_SHIFT;
#endif
}

dims dims_of(const md& desc) {
#if DNNL_VERSION_MAJOR >= 3
  return desc.get_dims();
#else
  return desc.dims();
#endif
}

dnnl::memory::data_type data_type_of(const md& desc) {
#if DNNL_VERSION_MAJOR >= 3
  return desc.get_data_type();
#else
  return desc.data_type();
#endif
}

void append_relu(dnnl::post_ops& post_ops) {
#if DNNL_VERSION_MAJOR >= 3
  post_ops.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
#else
  post_ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.f, 0.f);
#endif
}

int set_product_scale(primitive_attr& attr, float alpha) {
#if DNNL_VERSION_MAJOR >= 3
  if (alpha == 1.0f) return 0;
  attr.set_scales_mask(DNNL_ARG_WEIGHTS, 0);
  return DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS;
#else
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  return 0;
#endif
}

namespace {

std::string version() {
  return fmt::format("oneDNN {}.{}", DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR);
}

// " (capped by ONEDNN_MAX_CPU_ISA)" where the variable is set.
std::string cap_note() {
  return std::getenv("ONEDNN_MAX_CPU_ISA") ? " (capped by ONEDNN_MAX_CPU_ISA)" : "";
}

}  // namespace

std::string known_fault(int major, int minor, const cpu::CpuidReader& cpuid) {
  // The smallest L1 with which 3.7.2's brgemm blocking fits a block: 2 KiB and below divide by
  // zero for ResNet-50's 1x1 stride-2 backward data (reproduced by overriding the size).
  constexpr std::uint64_t kSmallestWorkingL1 = 4096;
  if (major != 3 || minor >= 8) return "";
  const std::string vendor = cpu::cpuid_vendor(cpuid);
  // xbyak takes its AMD path on "cAMD" in ECX, which a Hygon CPU ("uine") does not give.
  if (vendor != "AuthenticAMD") return "";
  const std::uint64_t l1 = cpu::unchecked_amd_l1_bytes_per_cpu(cpuid);
  if (l1 >= kSmallestWorkingL1) return "";
  return fmt::format(
      "oneDNN {}.{} takes this CPU's L1 data cache as {} byte(s) per CPU (CPUID leaf "
      "0x8000001D describes no cache, as on some virtual machines, and its xbyak before 7.06 "
      "reads the leaf unchecked): its brgemm convolution blocking then divides by zero (SIGFPE) "
      "for some shapes, ResNet-50's 1x1 stride-2 backward data among them. oneDNN 3.8 reads the "
      "leaf checked; ONEDNN_MAX_CPU_ISA=AVX avoids the brgemm kernels, with slower ones",
      major, minor, l1);
}

#if defined(__aarch64__)
// oneDNN 2.6 on AArch64 returns codes of its own through the x86 enum
// (src/cpu/aarch64/cpu_isa_traits.hpp): 0x1 Advanced SIMD, 0x1f SVE with 512-bit vectors, the
// only two levels it reports (256-bit SVE, as Neoverse V1's, and 128-bit, as N2's and V2's,
// report asimd); 0 where it found neither. Read as x86 codes they would say sse41 and so on.
std::string isa_name(dnnl::cpu_isa isa) {
  switch (static_cast<unsigned>(isa)) {
    case 0x1:
      return "asimd";
    case 0x1f:
      return "sve_512";
    case 0x0:
      return "aarch64 baseline (no JIT level)";
    default:
      return fmt::format("aarch64 isa code {:#x}", static_cast<unsigned>(isa));
  }
}

// oneDNN 2.6 has bf16 on x86-64 only: elsewhere its platform check (src/cpu/platform.cpp)
// refuses bf16 for every primitive, whatever BF16 instructions the CPU has.
LowPrecisionSupport bf16_support() {
  return {LowPrecisionPath::unavailable,
          fmt::format("unavailable: {} has no bf16 kernels on AArch64 (its level here: {}{})",
                      version(), isa_name(dnnl::get_effective_cpu_isa()), cap_note())};
}

LowPrecisionSupport f16_support() {
  return {LowPrecisionPath::unavailable,
          fmt::format("unavailable: trainbench runs f16 on cpu-onednn on x86-64 only (AVX512-FP16 "
                      "or AMX-FP16 with oneDNN 3.x); {} here, level {}{}",
                      version(), isa_name(dnnl::get_effective_cpu_isa()), cap_note())};
}
#else
namespace {

bool isa_includes(dnnl::cpu_isa isa, dnnl::cpu_isa part) {
  return (static_cast<unsigned>(isa) & static_cast<unsigned>(part)) == static_cast<unsigned>(part);
}

}  // namespace

std::string isa_name(dnnl::cpu_isa isa) {
  using cpu_isa = dnnl::cpu_isa;
  switch (isa) {
    case cpu_isa::sse41:
      return "sse41";
    case cpu_isa::avx:
      return "avx";
    case cpu_isa::avx2:
      return "avx2";
    case cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case cpu_isa::avx512_core:
      return "avx512_core";
    case cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
#if DNNL_VERSION_MAJOR >= 3
    case cpu_isa::avx2_vnni_2:
      return "avx2_vnni_2";
    case cpu_isa::avx512_core_fp16:
      return "avx512_core_fp16";
    case cpu_isa::avx512_core_amx_fp16:
      return "avx512_core_amx_fp16";
#endif
    default:
      return fmt::format("isa code {}", static_cast<int>(isa));
  }
}

// bf16 runs natively with AVX512_BF16 (or AMX), emulated on any other AVX-512 level, and on
// 3.x also through AVX2-VNNI-2's conversion instructions; not at all below.
LowPrecisionSupport bf16_support() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  const std::string level = isa_name(isa);
  if (isa_includes(isa, dnnl::cpu_isa::avx512_core_bf16))
    return {LowPrecisionPath::native, fmt::format("native ({}, {})", level, version())};
#if DNNL_VERSION_MAJOR >= 3
  if (isa_includes(isa, dnnl::cpu_isa::avx2_vnni_2))
    return {LowPrecisionPath::converted,
            fmt::format("converted on {} (AVX-NE-CONVERT loads, fp32 FMAs; {})", level, version())};
  const char* levels = "avx512_core (emulated), AVX512_BF16 or avx2_vnni_2 (converted)";
#else
  const char* levels = "avx512_core (emulated) or AVX512_BF16";
#endif
  if (isa_includes(isa, dnnl::cpu_isa::avx512_core))
    return {LowPrecisionPath::emulated,
            fmt::format("emulated on {} (no AVX512_BF16; {})", level, version())};
  return {LowPrecisionPath::unavailable,
          fmt::format("unavailable: {} runs bf16 from {}; this CPU has {}{}", version(), levels,
                      level, cap_note())};
}

// f16: 3.x runs it on AVX512-FP16 (and AMX-FP16), and through AVX2-VNNI-2's conversions as it
// does bf16; 2.x's dispatcher has no f16 level.
LowPrecisionSupport f16_support() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  const std::string level = isa_name(isa);
#if DNNL_VERSION_MAJOR >= 3
  if (isa_includes(isa, dnnl::cpu_isa::avx512_core_fp16))
    return {LowPrecisionPath::native, fmt::format("native ({}, {})", level, version())};
  if (isa_includes(isa, dnnl::cpu_isa::avx2_vnni_2))
    return {LowPrecisionPath::converted,
            fmt::format("converted on {} (AVX-NE-CONVERT loads, fp32 FMAs; {})", level, version())};
  return {LowPrecisionPath::unavailable,
          fmt::format("unavailable: {} runs f16 on AVX512-FP16 or AMX-FP16, or converted on "
                      "avx2_vnni_2; this CPU has {}{}",
                      version(), level, cap_note())};
#else
  return {LowPrecisionPath::unavailable,
          fmt::format("unavailable: {} has no f16 level (3.x runs f16 on AVX512-FP16 or "
                      "AMX-FP16); this CPU has {}{}",
                      version(), level, cap_note())};
#endif
}
#endif

namespace {

// Whether `desc` is dense row-major over its dims: an element's position in its memory is then
// its logical index.
bool row_major(const md& desc) {
#if DNNL_VERSION_MAJOR >= 3
  if (desc.get_format_kind() != dnnl::memory::format_kind::blocked || desc.get_inner_nblks() != 0 ||
      desc.get_submemory_offset() != 0)
    return false;
  const dims logical = desc.get_dims(), strides = desc.get_strides();
#else
  const dnnl_memory_desc_t& c = desc.data;
  if (c.format_kind != dnnl_blocked || c.format_desc.blocking.inner_nblks != 0 || c.offset0 != 0)
    return false;
  const dims logical(c.dims, c.dims + c.ndims),
      strides(c.format_desc.blocking.strides, c.format_desc.blocking.strides + c.ndims);
#endif
  std::int64_t expected = 1;
  for (std::size_t d = logical.size(); d-- > 0;) {
    if (logical[d] > 1 && strides[d] != expected) return false;
    expected *= logical[d];
  }
  return true;
}

}  // namespace

bool blocked_offsets(const md& desc, const md& plain, std::span<const std::int64_t> positions,
                     std::vector<std::int64_t>* offsets) {
#if DNNL_VERSION_MAJOR >= 3
  if (desc.get_format_kind() != dnnl::memory::format_kind::blocked ||
      desc.get_data_type() != plain.get_data_type())
    return false;
  const dims logical = desc.get_dims(), strides = desc.get_strides(),
             padded_offsets = desc.get_padded_offsets(), inner_blocks = desc.get_inner_blks(),
             inner_dims = desc.get_inner_idxs();
  const std::int64_t start = desc.get_submemory_offset();
#else
  const dnnl_memory_desc_t& c = desc.data;
  if (c.format_kind != dnnl_blocked || c.data_type != plain.data.data_type) return false;
  const dnnl_blocking_desc_t& blocking = c.format_desc.blocking;
  const dims logical(c.dims, c.dims + c.ndims),
      strides(blocking.strides, blocking.strides + c.ndims),
      padded_offsets(c.padded_offsets, c.padded_offsets + c.ndims),
      inner_blocks(blocking.inner_blks, blocking.inner_blks + blocking.inner_nblks),
      inner_dims(blocking.inner_idxs, blocking.inner_idxs + blocking.inner_nblks);
  const std::int64_t start = c.offset0;
#endif
  const std::size_t rank = logical.size();
  if (strides.size() != rank || inner_blocks.size() != inner_dims.size()) return false;
  if (!row_major(plain)) return false;  // positions are then not logical indices
  offsets->resize(positions.size());
  std::vector<std::int64_t> at(rank);
  for (std::size_t p = 0; p < positions.size(); ++p) {
    std::int64_t flat = positions[p];
    for (std::size_t d = rank; d-- > 0;) {
      at[d] = flat % logical[d] + (padded_offsets.empty() ? 0 : padded_offsets[d]);
      flat /= logical[d];
    }
    std::int64_t offset = start, block_stride = 1;
    for (std::size_t b = inner_blocks.size(); b-- > 0;) {  // the innermost block first
      const auto d = static_cast<std::size_t>(inner_dims[b]);
      offset += at[d] % inner_blocks[b] * block_stride;
      at[d] /= inner_blocks[b];
      block_stride *= inner_blocks[b];
    }
    for (std::size_t d = 0; d < rank; ++d) offset += at[d] * strides[d];
    (*offsets)[p] = offset;
  }
  return true;
}

}  // namespace tb::onednn::api
