// Launchers of the cuda backend's own training kernels (one .cu per family: elementwise,
// normalization, softmax_loss, embedding, pooling, optimizers, rms_norm): what cuBLASLt
// and cuDNN leave to the caller. Plain C++, so the plans include them without nvcc. Data is
// f32, bf16 or f16 as the op's dtype says (statistics, scale and shift stay f32); every
// launcher returns the launch's error (an op with no elements launches nothing). `scratch` is
// device workspace of the size the matching *_scratch_bytes() gives; reductions go through it
// in a fixed order, so results do not depend on scheduling, except the embedding's
// scatter-add (atomic adds: a row may repeat across tokens).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backends/ops.h"

namespace tb::cuda {

// Whether the kernels take data of this dtype (f32, bf16, f16).
bool kernel_dtype(DType dtype);

cudaError_t launch_eltwise(const EltwiseOp& op, const void* first, const void* diff_dst, void* out,
                           cudaStream_t stream);
cudaError_t launch_add(const BinaryOp& op, const void* x, const void* y, void* dst,
                       cudaStream_t stream);
cudaError_t launch_dropout(const DropoutOp& op, const void* in, std::int32_t step, void* out,
                           cudaStream_t stream);
cudaError_t launch_cast(const CastOp& op, const void* src, void* dst, cudaStream_t stream);
// `count` values of `dtype` set to seeded_uniform(seed, i) (training_math.h).
cudaError_t launch_fill_random(DType dtype, void* data, std::int64_t count, std::uint64_t seed,
                               cudaStream_t stream);

std::size_t layer_norm_scratch_bytes(const LayerNormOp& op);
cudaError_t launch_layer_norm_forward(const LayerNormOp& op, const void* src, const float* gamma,
                                      const float* beta, void* dst, float* mean, float* variance,
                                      cudaStream_t stream);
cudaError_t launch_layer_norm_backward(const LayerNormOp& op, const void* src, const void* diff_dst,
                                       const float* gamma, const float* mean, const float* variance,
                                       void* diff_src, float* diff_gamma, float* diff_beta,
                                       void* scratch, cudaStream_t stream);

// RMSNorm (rms_norm.cu; its op's room: backends/ops/rms_norm.h).
std::size_t rms_norm_scratch_bytes(const RmsNormOp& op);
cudaError_t launch_rms_norm_forward(const RmsNormOp& op, const void* src, const float* gamma,
                                    void* dst, float* inverse_rms, cudaStream_t stream);
cudaError_t launch_rms_norm_backward(const RmsNormOp& op, const void* src, const void* diff_dst,
                                     const float* gamma, const float* inverse_rms, void* diff_src,
                                     float* diff_gamma, void* scratch, cudaStream_t stream);

cudaError_t launch_softmax_forward(const SoftmaxOp& op, const void* src, const float* mask,
                                   void* dst, cudaStream_t stream);
cudaError_t launch_softmax_backward(const SoftmaxOp& op, const void* dst, const void* diff_dst,
                                    void* diff_src, cudaStream_t stream);

std::size_t softmax_cross_entropy_scratch_bytes(const SoftmaxCrossEntropyOp& op);
cudaError_t launch_softmax_cross_entropy_forward(const SoftmaxCrossEntropyOp& op,
                                                 const void* logits, const std::int32_t* labels,
                                                 void* probabilities, void* loss, void* scratch,
                                                 cudaStream_t stream);
// loss_scale: 1 unless the op is scaled (the host-side scale, read at launch).
cudaError_t launch_softmax_cross_entropy_backward(const SoftmaxCrossEntropyOp& op,
                                                  const void* probabilities,
                                                  const std::int32_t* labels, float loss_scale,
                                                  void* diff_logits, cudaStream_t stream);

// diff_table's dtype: embedding_table_grad_dtype(op) (backends/operands.h).
cudaError_t launch_embedding_forward(const EmbeddingOp& op, const void* table,
                                     const std::int32_t* ids, void* dst, cudaStream_t stream);
cudaError_t launch_embedding_backward(const EmbeddingOp& op, const void* diff_dst,
                                      const std::int32_t* ids, void* diff_table,
                                      cudaStream_t stream);

// Batch norm's operands, by the names batch_norm_operands() declares; null where the pass
// (inference, forward or backward) has none.
struct BatchNormBuffers {
  const void *src = nullptr, *diff_dst = nullptr;
  const float *gamma = nullptr, *beta = nullptr;
  float *mean = nullptr, *variance = nullptr;             // written forward, read backward
  float *running_mean = nullptr, *running_var = nullptr;  // read at inference, updated forward
  std::int32_t* relu_mask = nullptr;                      // written forward, read backward
  void *dst = nullptr, *diff_src = nullptr;
  float *diff_gamma = nullptr, *diff_beta = nullptr;
};

// Batch norm over 4-D data in the layout channels_last() (nhwc.h) picks for the op.
std::size_t batch_norm_scratch_bytes(const BatchNormOp& op);
cudaError_t launch_batch_norm(const BatchNormOp& op, const BatchNormBuffers& buffers, void* scratch,
                              cudaStream_t stream);

// Pooling's operands, by the names pool_operands() declares; null where the pass has none.
struct PoolBuffers {
  const void *src = nullptr, *diff_dst = nullptr;
  std::int32_t* indices = nullptr;  // max pooling: written forward, read backward
  void *dst = nullptr, *diff_src = nullptr;
};

// Max and global-average pooling, layout as batch norm.
cudaError_t launch_pool(const PoolOp& op, const PoolBuffers& buffers, cudaStream_t stream);

// What the kernels add around cuDNN's batch norm (cudnn_norm.cpp), each over `count` values:
// ReLU in place with its mask (mask = y > 0), the gradient through that mask, and the
// per-channel conversions between the batch variance and cuDNN's inverse standard deviation.
cudaError_t launch_relu_with_mask(DType dtype, std::int64_t count, void* data, std::int32_t* mask,
                                  cudaStream_t stream);
cudaError_t launch_masked_gradient(DType dtype, std::int64_t count, const void* diff_dst,
                                   const std::int32_t* mask, void* out, cudaStream_t stream);
cudaError_t launch_inverse_std(std::int64_t count, const float* variance, float epsilon,
                               float* inverse, cudaStream_t stream);
cudaError_t launch_variance_from_inverse_std(std::int64_t count, float* values, float epsilon,
                                             cudaStream_t stream);

// Copies [n, c, h, w] values of `element` (2 or 4) bytes from NCHW to NHWC (to_nhwc) or back,
// on the device (a convolution's weights between KCRS and KRSC).
cudaError_t launch_convert_channels(std::size_t element, std::int64_t n, std::int64_t c,
                                    std::int64_t h, std::int64_t w, const void* src, void* dst,
                                    bool to_nhwc, cudaStream_t stream);

// A bias per channel over `count` values, then ReLU if asked: element i's channel is
// (i / inner) % channels (fully connected [rows, cols] and NHWC: inner 1; NCHW: inner H * W).
// Fully connected layers' bias gradient: diff_bias[c] = sum over r of diff_dst[r, c].
cudaError_t launch_add_bias(DType dtype, std::int64_t count, std::int64_t channels,
                            std::int64_t inner, bool relu, const void* bias, void* dst,
                            cudaStream_t stream);
// Scratch for column sums over `cols` columns with `accumulator`-byte partial sums.
std::size_t column_sums_scratch_bytes(std::int64_t cols, std::size_t accumulator = sizeof(float));
cudaError_t launch_bias_gradient(DType dtype, std::int64_t rows, std::int64_t cols,
                                 const void* diff_dst, float* diff_bias, void* scratch,
                                 cudaStream_t stream);

// One optimizer step on f32 parameters; `hyper` is the host-side hyper-parameter array
// (optimizer_operands()); lamb's tensor offsets are on the device.
// Loss scaling: grads *= inverse_scale in place, *found_nonfinite = any of them infinite or NaN.
cudaError_t launch_unscale_gradients(const UnscaleGradientsOp& op, void* grads, float inverse_scale,
                                     std::int32_t* found_nonfinite, cudaStream_t stream);

std::size_t optimizer_scratch_bytes(const OptimizerOp& op);
cudaError_t launch_optimizer(const OptimizerOp& op, float* weights, const float* grads,
                             float* first_moment, float* second_moment,
                             const std::int32_t* tensor_offsets, const float* hyper, void* scratch,
                             cudaStream_t stream);

}  // namespace tb::cuda
