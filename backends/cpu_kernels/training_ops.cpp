#include "backends/cpu_kernels/training_ops.h"

#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "backends/cpu_kernels/training_families.h"
#include "backends/cpu_kernels/vector_kernels.h"

namespace tb::cpu {
namespace {

Status missing_here(const OpDesc& desc) {
  return Status::Unimplemented(
      fmt::format("no shared CPU {} in this dtype (f64 reference only)", op_name(desc)));
}

}  // namespace

Status plan_shared_training_op(const OpDesc& desc, std::unique_ptr<Plan>* out) {
  // The kernel level for the f32 and bf16 paths, chosen now (TRAINBENCH_MAX_ISA caps it).
  const CpuKernels* k = nullptr;
  if (Status status = kernels_from_environment(&k); !status.ok()) return status;
  return std::visit(
      [&](const auto& op) {
        if constexpr (requires { plan_shared(k, op, out); }) {
          return plan_shared(k, op, out);
        } else if constexpr (std::is_same_v<std::decay_t<decltype(op)>, AttentionOp>) {
          if (op.dtype == DType::f64) return missing_here(desc);
          return Status::Unimplemented(
              "no fused attention on the CPU: oneDNN 2.6 has no scaled dot-product attention "
              "primitive and OpenBLAS none (the f64 reference only)");
        } else {
          return missing_here(desc);
        }
      },
      desc);
}
}  // namespace tb::cpu
