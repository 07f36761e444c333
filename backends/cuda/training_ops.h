// The cuda backend's training ops: fully connected layers through cuBLASLt (the bias and its
// gradient in its epilogue, or own kernels where it has no algorithm for that), and own kernels
// (one .cu per family, training_kernels.h) for batch, layer and RMS norm, ReLU / GELU / tanh, add,
// dropout, pooling,
// scaled masked softmax, row gather / scatter-add, softmax cross-entropy, casts and the SGD,
// AdamW and LAMB updates. Data in f32, bf16 or f16; 4-D activations NHWC for 16-bit data and
// NCHW otherwise (channels_last() in nhwc.h).
#pragma once

#include <cublasLt.h>

#include <memory>

#include "backends/backend.h"

namespace tb::cuda {

// Unimplemented for an op or dtype not listed above (GEMM, convolution and the benchmark
// ops are planned elsewhere).
Status plan_training_op(cublasLtHandle_t handle, const OpDesc& op, std::unique_ptr<Plan>* out);

}  // namespace tb::cuda
