// trainbench's own CPU kernels: the hot loops of the shared training ops on fp32 (and bf16)
// data, im2col / col2im and STREAM, as one table of function pointers per instruction-set
// level (backends/host/isa.h). The bodies are written once (vector_kernels_body.inc) and
// compiled three times: for baseline x86-64 or the host architecture (portable), x86-64-v3
// (avx2: AVX2 + FMA) and x86-64-v4 (avx512); a plan takes the table of the level chosen at run
// time (TRAINBENCH_MAX_ISA caps it). The f64 reference keeps its plain loops in
// training_ops.cpp; these compute the same functions in float, with the same formulas and
// accumulation precision (batch-norm and pooling sums in double).
#pragma once

#include <cstdint>

#include "backends/host/isa.h"
#include "backends/optimizer_math.h"
#include "backends/status.h"

namespace tb::cpu {

// Shapes as the kernels take them: plain values without member functions, so that the bodies
// built for AVX2 or AVX-512 call no shared inline function (see vector_kernels_body.inc).
struct BatchNormShape {              // NCHW
  std::int64_t mb, channels, plane;  // plane = h * w
  float epsilon;
};
struct PoolShape {  // NCHW, planes = mb * channels
  std::int64_t planes, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw;
};
struct ConvShape {  // one image of a 2-D convolution (NCHW)
  std::int64_t ic, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw;
};

struct CpuKernels {
  Isa isa;  // the level these loops were compiled for

  // --- element-wise ---
  void (*relu_forward_f32)(std::int64_t count, const float* src, float* dst);
  // diff_src = dst > 0 ? diff_dst : 0
  void (*relu_backward_f32)(std::int64_t count, const float* dst, const float* diff_dst,
                            float* diff_src);
  // dst = x + y, then max(dst, 0) with relu
  void (*add_f32)(std::int64_t count, const float* x, const float* y, float* dst, bool relu);
  // out = in * keep * scale; in and out may alias.
  void (*dropout_f32)(const float* in, float* out, std::int64_t count, std::uint64_t seed,
                      std::int32_t step, std::uint64_t threshold, float scale);
  void (*dropout_bf16)(const std::uint16_t* in, std::uint16_t* out, std::int64_t count,
                       std::uint64_t seed, std::int32_t step, std::uint64_t threshold, float scale);
  // Round to nearest even, as float_to_bf16 / bf16_to_float.
  void (*cast_f32_to_bf16)(const float* src, std::uint16_t* dst, std::int64_t count);
  void (*cast_bf16_to_f32)(const std::uint16_t* src, float* dst, std::int64_t count);

  // --- softmax and loss ---
  // Row softmax of scale * src + mask (mask: one row per rows_per_mask rows, may be null).
  void (*softmax_rows_f32)(const float* src, const float* mask, float* dst, std::int64_t rows,
                           std::int64_t cols, float scale, std::int64_t rows_per_mask);
  void (*softmax_rows_bf16)(const std::uint16_t* src, const float* mask, std::uint16_t* dst,
                            std::int64_t rows, std::int64_t cols, float scale,
                            std::int64_t rows_per_mask);
  // probabilities = row softmax of logits [rows, classes]; returns the summed cross-entropy
  // loss of the labels (in double, from each row's maximum and sum).
  double (*softmax_cross_entropy_f32)(const float* logits, const std::int32_t* labels,
                                      float* probabilities, std::int64_t rows,
                                      std::int64_t classes);

  // --- batch norm over N, H, W per channel (statistics in double, as the f64 reference) ---
  // Training forward: batch mean and biased variance, dst = gamma (x - mean) / sqrt(var + eps)
  // + beta; with relu_mask non-null, dst = max(dst, 0) and relu_mask = dst > 0.
  void (*batch_norm_forward_f32)(const BatchNormShape& shape, const float* src, const float* gamma,
                                 const float* beta, float* dst, float* mean, float* variance,
                                 std::int32_t* relu_mask);
  // Inference: the running statistics instead of the batch's; fuse_relu as above, no mask.
  void (*batch_norm_inference_f32)(const BatchNormShape& shape, const float* src,
                                   const float* gamma, const float* beta, const float* running_mean,
                                   const float* running_var, float* dst, bool fuse_relu);
  // Backward from the forward's batch statistics; relu_mask (may be null) zeroes diff_dst.
  void (*batch_norm_backward_f32)(const BatchNormShape& shape, const float* src,
                                  const float* diff_dst, const float* gamma, const float* mean,
                                  const float* variance, const std::int32_t* relu_mask,
                                  float* diff_src, float* diff_gamma, float* diff_beta);

  // --- pooling ---
  // Max pooling: dst and, per output, the index in its input plane of the first maximum
  // (-1 for a window wholly in the padding, whose dst is -infinity).
  void (*max_pool_forward_f32)(const PoolShape& shape, const float* src, float* dst,
                               std::int32_t* indices);
  void (*max_pool_backward_f32)(const PoolShape& shape, const float* diff_dst,
                                const std::int32_t* indices, float* diff_src);
  // Global average pooling: one value per plane of ih * iw (the sum in double).
  void (*average_pool_forward_f32)(const PoolShape& shape, const float* src, float* dst);
  void (*average_pool_backward_f32)(const PoolShape& shape, const float* diff_dst, float* diff_src);

  // --- optimizers ---
  // PyTorch's SGD with momentum (backends/optimizer_math.h).
  void (*sgd_momentum_f32)(std::int64_t count, float* weights, const float* grads, float* momentum,
                           float learning_rate, float mu, float weight_decay);
  // PyTorch's AdamW over fp32 arrays (coefficients: backends/optimizer_math.h). On AVX-512
  // without the divider (reciprocal square root and reciprocal refined by Newton steps, within
  // float rounding of the portable loop's sqrt and division).
  void (*adamw_f32)(std::int64_t count, float* weights, const float* grads, float* m, float* v,
                    const AdamCoefficients& k);
  // LAMB (AdamW's moments, per-tensor trust ratio |w| / |u|) over tensors [offsets[t],
  // offsets[t + 1]) of flat fp32 arrays; on AVX-512 without the divider, as adamw_f32.
  void (*lamb_f32)(std::int64_t tensors, const std::int32_t* offsets, float* weights,
                   const float* grads, float* m, float* v, const AdamCoefficients& k);

  // --- convolution lowering (one image; see im2col.h) ---
  void (*im2col_f32)(const ConvShape& shape, const float* image, float* col);
  void (*col2im_f32)(const ConvShape& shape, const float* col, float* image);

  // --- STREAM over fp64 arrays, OpenMP static schedule ---
  void (*stream_copy)(const double* a, double* c, std::int64_t n);                  // c = a
  void (*stream_scale)(double* b, const double* c, double scalar, std::int64_t n);  // b = s c
  void (*stream_add)(const double* a, const double* b, double* c, std::int64_t n);  // c = a + b
  void (*stream_triad)(double* a, const double* b, const double* c, double scalar,
                       std::int64_t n);                                    // a = b + s c
  double (*stream_dot)(const double* a, const double* b, std::int64_t n);  // sum a b
};

// The table for a level. Only a level the CPU runs (isa_supported) may be called; a level not
// built for this architecture (avx2 and avx512 off x86-64) answers the portable table, whose
// `isa` says so.
const CpuKernels& cpu_kernels(Isa isa);

// The table for the level isa_from_environment() chooses (the best this CPU runs, capped by
// TRAINBENCH_MAX_ISA): what a plan takes when it is made. A malformed cap is InvalidArgument.
Status kernels_from_environment(const CpuKernels** out);

// True when `kernels` are the portable loops on a CPU that runs a vector level: what runs
// is then a reference, not the real speed (Plan::is_reference).
bool is_reference_level(const CpuKernels& kernels);

// The tables themselves, one per built level (vector_kernels_<level>.cpp); use cpu_kernels.
namespace portable {
extern const CpuKernels kKernels;
}
#if defined(__x86_64__)
namespace avx2 {
extern const CpuKernels kKernels;
}
namespace avx512 {
extern const CpuKernels kKernels;
}
#endif

}  // namespace tb::cpu
