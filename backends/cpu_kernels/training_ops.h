// The training ops every CPU backend shares, in plain layouts (NCHW activations, OIHW and
// [out, in] weights), written once for float and double, one file per family
// (training_families.h): batch norm and layer norm (normalization.cpp); ReLU, GELU, tanh, add,
// dropout, f32 <-> bf16 casts and the unscale-and-check (elementwise.cpp); max / global-average
// pooling (pooling.cpp); scaled masked softmax and softmax cross-entropy (softmax_loss.cpp);
// row gather / scatter-add (embedding.cpp); the SGD, AdamW and LAMB updates (optimizers.cpp).
// In f32 and f64 (some in bf16): what a library lacks, and the double-precision reference. The
// products (convolution, fully connected, GEMM, attention) are f64 only and live with the
// reference (backends/reference/reference_products.h): a slow f32 loop would only mislead a
// benchmark.
// The f32 and bf16 paths run the kernel table (vector_kernels.h) of the ISA level chosen when
// the plan is made (TRAINBENCH_MAX_ISA caps it; a malformed value is InvalidArgument), named at
// the end of the plan's implementation; the f64 reference keeps its plain loops.
// For these plans the `native` layout is the plain one.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace tb::cpu {

// Unimplemented for an op or dtype not listed above (the products among them).
Status plan_shared_training_op(const OpDesc& op, std::unique_ptr<Plan>* out);

// Running statistics as PyTorch keeps them: the batch variance made unbiased over the
// `reduced` values each channel's statistics come from.
template <typename T>
void update_running_stats(const T* mean, const T* variance, std::int64_t channels,
                          std::int64_t reduced, float momentum, T* running_mean, T* running_var);

}  // namespace tb::cpu
