// The precision policy, written once for every backend and model: which dtype each kind of
// data uses for a step computed in a given dtype.
//   f32, f64:  everything in that dtype (f64 is the double-precision reference).
//   bf16:      mixed precision as PyTorch's autocast does it: activations, convolutions,
//              batch-norm data, pooling and the residual joins in bf16 (batch-norm statistics,
//              scale and shift in fp32); master weights, their gradients and the optimizer
//              state in fp32 (the convolutions read a bf16 copy made at the start of each
//              step); the classifier and the loss in fp32.
#pragma once

#include "backends/ops.h"
#include "models/network.h"

namespace tb {

struct PrecisionPolicy {
  DType compute = DType::f32;  // activations and the layers that produce them
  DType master = DType::f32;   // parameters, gradients, optimizer state
  DType head = DType::f32;     // classifier and loss

  static PrecisionPolicy for_compute(DType compute) {
    if (compute == DType::bf16) return {DType::bf16, DType::f32, DType::f32};
    return {compute, compute, compute};
  }
  bool mixed() const { return compute != master; }
  DType layer_dtype(LayerKind kind) const {
    return kind == LayerKind::fully_connected || kind == LayerKind::softmax_cross_entropy ? head
                                                                                          : compute;
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
