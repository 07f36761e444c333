// The precision policy, written once for every backend and model: which dtype each kind of
// data uses for a step computed in a given dtype.
//   f32, f64:  everything in that dtype (f64 is the double-precision reference).
//   tf32:      f32 data throughout; the convolutions, linear layers and attention GEMMs
//              multiply in TF32 (fp32 accumulation), as PyTorch's allow_tf32 does.
//   bf16, f16: mixed precision as PyTorch's autocast does it: activations, convolutions,
//              batch-norm data, pooling and the residual joins in the low-precision dtype
//              (batch-norm statistics, scale and shift in fp32); master weights, their
//              gradients and the optimizer state in fp32 (the convolutions read a low-precision
//              copy made at the start of each step); the classifier and the loss in fp32.
//              f16 adds dynamic loss scaling (its narrow exponent range underflows small
//              gradients); bf16 has fp32's range and needs none.
#pragma once

#include "backends/ops.h"
#include "models/network.h"

namespace tb {

struct PrecisionPolicy {
  DType compute = DType::f32;  // activations and the layers that produce them
  DType master = DType::f32;   // parameters, gradients, optimizer state
  DType head = DType::f32;     // classifier and loss
  bool tf32_matmul = false;    // f32 GEMMs and convolutions multiply in TF32

  static PrecisionPolicy for_compute(DType compute) {
    if (compute == DType::bf16 || compute == DType::f16)
      return {compute, DType::f32, DType::f32, false};
    if (compute == DType::tf32) return {DType::f32, DType::f32, DType::f32, true};
    return {compute, compute, compute, false};
  }
  bool mixed() const { return compute != master; }
  // Whether the step scales its loss dynamically by default (fp16's narrow range).
  bool needs_loss_scaling() const { return compute == DType::f16; }
  DType layer_dtype(LayerKind kind) const {
    return kind == LayerKind::fully_connected || kind == LayerKind::softmax_cross_entropy ? head
                                                                                          : compute;
  }
  // The dtype a GEMM or convolution on `data` of a layer computes in: TF32 for f32 data under
  // the tf32 policy, the data's own dtype otherwise.
  DType matmul_dtype(DType data) const {
    return tf32_matmul && data == DType::f32 ? DType::tf32 : data;
  }
  // Weights a layer computes with: convolutions, linear layers and embeddings read the compute
  // copy, the rest (normalization scale and shift, the classifier) the master.
  DType weight_dtype(LayerKind kind) const {
    return kind == LayerKind::conv || kind == LayerKind::linear || kind == LayerKind::embedding
               ? compute
               : master;
  }
};

}  // namespace tb
