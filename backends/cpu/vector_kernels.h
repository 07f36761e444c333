// The shared CPU training ops' hot loops on fp32 and bf16 data, written so the compiler
// vectorizes them, and compiled for AVX-512, AVX2 and baseline x86-64 with the best picked at
// load time (the build targets baseline x86-64). The f64 reference keeps its plain loops in
// training_ops.cpp; these compute the same functions in float.
#pragma once

#include <cstdint>

#include "backends/optimizer_math.h"
#include "backends/seeded.h"

namespace tb::cpu {

// out = in * keep * scale; in and out may alias.
void dropout_f32(const float* in, float* out, std::int64_t count, std::uint64_t seed,
                 std::int32_t step, std::uint64_t threshold, float scale);
void dropout_bf16(const std::uint16_t* in, std::uint16_t* out, std::int64_t count,
                  std::uint64_t seed, std::int32_t step, std::uint64_t threshold, float scale);

// Row softmax of scale * src + mask (mask: one row per rows_per_mask rows, may be null).
void softmax_rows_f32(const float* src, const float* mask, float* dst, std::int64_t rows,
                      std::int64_t cols, float scale, std::int64_t rows_per_mask);
void softmax_rows_bf16(const std::uint16_t* src, const float* mask, std::uint16_t* dst,
                       std::int64_t rows, std::int64_t cols, float scale,
                       std::int64_t rows_per_mask);

// probabilities = row softmax of logits [rows, classes]; returns the summed cross-entropy
// loss of the labels (in double, from each row's maximum and sum).
double softmax_cross_entropy_f32(const float* logits, const std::int32_t* labels,
                                 float* probabilities, std::int64_t rows, std::int64_t classes);

// Round to nearest even, as float_to_bf16 / bf16_to_float.
void cast_f32_to_bf16(const float* src, std::uint16_t* dst, std::int64_t count);
void cast_bf16_to_f32(const std::uint16_t* src, float* dst, std::int64_t count);

// PyTorch's AdamW over fp32 arrays (coefficients: backends/optimizer_math.h).
// On AVX-512 without the divider (reciprocal square root and reciprocal refined by Newton
// steps, within float rounding of adamw_portable's sqrt and division).
void adamw_f32(std::int64_t count, float* weights, const float* grads, float* m, float* v,
               const AdamCoefficients& k);
void adamw_portable(std::int64_t count, float* weights, const float* grads, float* m, float* v,
                    const AdamCoefficients& k);
// LAMB (AdamW's moments, per-tensor trust ratio |w| / |u|) over tensors [offsets[t],
// offsets[t + 1]) of flat fp32 arrays; on AVX-512 without the divider, as adamw_f32.
void lamb_f32(std::int64_t tensors, const std::int32_t* offsets, float* weights, const float* grads,
              float* m, float* v, const AdamCoefficients& k);
void lamb_portable(std::int64_t tensors, const std::int32_t* offsets, float* weights,
                   const float* grads, float* m, float* v, const AdamCoefficients& k);

}  // namespace tb::cpu
