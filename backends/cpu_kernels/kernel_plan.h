// What the shared CPU kernels' plans are made of (cpu_kernels/ and reference/ only): a plan
// that runs one function over the operand buffers, and make_plan, which instantiates a kernel
// body for the op's dtype.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu_kernels/vector_kernels.h"
#include "backends/host/host_plan.h"
#include "backends/low_precision.h"
#include "backends/operands.h"

namespace tb::cpu {

using Index = std::int64_t;

// Statistics, scale and shift: f32 for low-precision data, f64 for the reference.
template <typename T>
using StatisticsType = std::conditional_t<std::is_same_v<T, double>, double, float>;

// A plan whose work is one function over the operand buffers.
class KernelPlan final : public CpuPlan {
 public:
  using Kernel = std::function<void(const BoundOperands&)>;
  KernelPlan(std::vector<OperandSpec> operands, std::string implementation, Kernel kernel,
             bool reference = false)
      : kernel_(std::move(kernel)) {
    operands_ = std::move(operands);
    implementation_ = std::move(implementation);
    is_reference_ = reference;
  }
  Status run(std::span<const Buffer> operands, Buffer) override {
    kernel_(BoundOperands(operands_, operands));
    return Status::Ok();
  }

 private:
  Kernel kernel_;
};

inline bool is_float_or_double(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64;
}

// Instantiates `Body<T>` for the op's dtype: f32 or f64, and bf16 (stored as Bf16, computed in
// float) for the ops no library here offers in bf16. `kernels`: the table the f32 / bf16 body
// runs (its level is named in the implementation), or null where those bodies are plain loops
// here; the f64 reference never uses it.
enum class Bf16Data { refused, accepted };
template <Bf16Data bf16 = Bf16Data::refused, typename Kernel>
Status make_plan(DType dtype, std::vector<OperandSpec> operands, std::string_view what,
                 const CpuKernels* kernels, Kernel&& kernel, std::unique_ptr<Plan>* out) {
  const bool bf16_ok = bf16 == Bf16Data::accepted && dtype == DType::bf16;
  if (!is_float_or_double(dtype) && !bf16_ok)
    return Status::Unimplemented(fmt::format("the shared CPU {} runs in f32 and f64{}, not {}",
                                             what, bf16 == Bf16Data::accepted ? " and bf16" : "",
                                             dtype_name(dtype)))
        .because(ReasonCode::dtype_unsupported);
  const bool tabled = kernels && dtype != DType::f64;
  const std::string implementation =
      fmt::format("shared CPU {} ({}, plain layout{}{})", what, dtype_name(dtype),
                  tabled ? ", " : "", tabled ? isa_name(kernels->isa) : "");
  KernelPlan::Kernel body;
  if (dtype == DType::f64)
    body = [kernel](const BoundOperands& b) { kernel(double{}, b); };
  else if (dtype == DType::f32)
    body = [kernel](const BoundOperands& b) { kernel(float{}, b); };
  else if constexpr (bf16 == Bf16Data::accepted)
    body = [kernel](const BoundOperands& b) { kernel(Bf16{}, b); };
  // The f64 loops are the reference itself; the portable float level is one where a vector
  // level exists.
  *out =
      std::make_unique<KernelPlan>(std::move(operands), implementation, std::move(body),
                                   dtype == DType::f64 || (tabled && is_reference_level(*kernels)));
  return Status::Ok();
}

}  // namespace tb::cpu
