// The shared CPU kernels by family (cpu_kernels/ only): one plan_shared overload per op a
// family file holds. training_ops.cpp dispatches an OpDesc to the overload of its type; an op
// with none is missing here. `k`: the kernel table of the f32 and bf16 paths.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/cpu_kernels/vector_kernels.h"

namespace tb::cpu {

// normalization.cpp
Status plan_shared(const CpuKernels* k, const BatchNormOp& op, std::unique_ptr<Plan>* out);
Status plan_shared(const CpuKernels* k, const LayerNormOp& op, std::unique_ptr<Plan>* out);
// elementwise.cpp
Status plan_shared(const CpuKernels* k, const EltwiseOp& op, std::unique_ptr<Plan>* out);
Status plan_shared(const CpuKernels* k, const BinaryOp& op, std::unique_ptr<Plan>* out);
Status plan_shared(const CpuKernels* k, const DropoutOp& op, std::unique_ptr<Plan>* out);
Status plan_shared(const CpuKernels* k, const CastOp& op, std::unique_ptr<Plan>* out);
Status plan_shared(const CpuKernels* k, const UnscaleGradientsOp& op, std::unique_ptr<Plan>* out);
// pooling.cpp
Status plan_shared(const CpuKernels* k, const PoolOp& op, std::unique_ptr<Plan>* out);
// softmax_loss.cpp
Status plan_shared(const CpuKernels* k, const SoftmaxOp& op, std::unique_ptr<Plan>* out);
Status plan_shared(const CpuKernels* k, const SoftmaxCrossEntropyOp& op,
                   std::unique_ptr<Plan>* out);
// embedding.cpp
Status plan_shared(const CpuKernels* k, const EmbeddingOp& op, std::unique_ptr<Plan>* out);
// rms_norm.cpp (its op's room: backends/ops/rms_norm.h)
Status plan_shared(const CpuKernels* k, const RmsNormOp& op, std::unique_ptr<Plan>* out);
// optimizers.cpp
Status plan_shared(const CpuKernels* k, const OptimizerOp& op, std::unique_ptr<Plan>* out);

}  // namespace tb::cpu
