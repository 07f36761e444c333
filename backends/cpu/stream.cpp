#include "backends/cpu/stream.h"

#include <fmt/format.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/operands.h"

namespace tb::cpu {
namespace {

class StreamPlan final : public CpuPlan {
 public:
  explicit StreamPlan(const StreamOp& op) : op_(op) {
    operands_ = stream_operands(op);
    implementation_ = "openmp static loop, ordinary stores";
    math_mode_ = "fp64";
  }

  Status run(std::span<const Buffer> operands, Buffer) override {
    double* __restrict a = static_cast<double*>(operands[0].data);
    double* __restrict b = static_cast<double*>(operands[1].data);
    double* __restrict c = static_cast<double*>(operands[2].data);
    const std::int64_t n = op_.n;
    const double s = op_.scalar;
    switch (op_.kernel) {
      case StreamKernel::copy:
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) c[i] = a[i];
        break;
      case StreamKernel::scale:
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) b[i] = s * c[i];
        break;
      case StreamKernel::add:
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
        break;
      case StreamKernel::triad:
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
        break;
      case StreamKernel::dot: {
        double sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
        for (std::int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
        *static_cast<double*>(operands[3].data) = sum;
        break;
      }
    }
    return Status::Ok();
  }

 private:
  StreamOp op_;
};

}  // namespace

Status plan_stream(const StreamOp& op, std::unique_ptr<Plan>* out) {
  if (op.n <= 0) return Status::InvalidArgument(fmt::format("stream needs n > 0, got {}", op.n));
  *out = std::make_unique<StreamPlan>(op);
  return Status::Ok();
}

double stream_bytes(const StreamOp& op) {
  const int arrays = (op.kernel == StreamKernel::add || op.kernel == StreamKernel::triad) ? 3 : 2;
  return static_cast<double>(arrays) * sizeof(double) * static_cast<double>(op.n);
}

}  // namespace tb::cpu
