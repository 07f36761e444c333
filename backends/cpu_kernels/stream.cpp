#include "backends/cpu_kernels/stream.h"

#include <fmt/format.h>

#include "backends/cpu_kernels/vector_kernels.h"
#include "backends/host/host_plan.h"
#include "backends/operands.h"

namespace tb::cpu {
namespace {

class StreamPlan final : public CpuPlan {
 public:
  StreamPlan(const StreamOp& op, const CpuKernels* kernels) : op_(op), kernels_(kernels) {
    operands_ = stream_operands(op);
    implementation_ =
        fmt::format("openmp static loop, ordinary stores, {}", isa_name(kernels->isa));
    math_mode_ = "fp64";
    is_reference_ = is_reference_level(*kernels);
  }

  Status run(std::span<const Buffer> operands, Buffer) override {
    // Each kernel writes the one array its declaration marks as an output.
    const BoundOperands bound(operands_, operands);
    auto* a = static_cast<double*>(bound.buffer("a").data);
    auto* b = static_cast<double*>(bound.buffer("b").data);
    auto* c = static_cast<double*>(bound.buffer("c").data);
    const std::int64_t n = op_.n;
    const double s = op_.scalar;
    switch (op_.kernel) {
      case StreamKernel::copy:
        kernels_->stream_copy(a, c, n);
        break;
      case StreamKernel::scale:
        kernels_->stream_scale(b, c, s, n);
        break;
      case StreamKernel::add:
        kernels_->stream_add(a, b, c, n);
        break;
      case StreamKernel::triad:
        kernels_->stream_triad(a, b, c, s, n);
        break;
      case StreamKernel::dot:
        *bound.out<double>("result") = kernels_->stream_dot(a, b, n);
        break;
    }
    return Status::Ok();
  }

 private:
  StreamOp op_;
  const CpuKernels* kernels_;
};

}  // namespace

Status plan_stream(const StreamOp& op, std::unique_ptr<Plan>* out) {
  if (op.n <= 0) return Status::InvalidArgument(fmt::format("stream needs n > 0, got {}", op.n));
  const CpuKernels* kernels = nullptr;
  if (Status status = kernels_from_environment(&kernels); !status.ok()) return status;
  *out = std::make_unique<StreamPlan>(op, kernels);
  return Status::Ok();
}

double stream_bytes(const StreamOp& op) {
  const int arrays = (op.kernel == StreamKernel::add || op.kernel == StreamKernel::triad) ? 3 : 2;
  return static_cast<double>(arrays) * sizeof(double) * static_cast<double>(op.n);
}

}  // namespace tb::cpu
