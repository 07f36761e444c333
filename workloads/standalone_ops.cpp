#include "workloads/standalone_ops.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include <fmt/format.h>

#include "backends/numeric.h"
#include "workloads/workload.h"

namespace tb {
namespace {

// What an integer operand of a product op holds: attention's key lengths, all of the sequence
// (no padding, the whole work the FLOP count assumes).
std::int32_t integer_fill(const OpDesc& desc) {
  if (const auto* attention = std::get_if<AttentionOp>(&desc))
    return static_cast<std::int32_t>(attention->sequence);
  return 0;
}

// Whether two product ops are the same problem (the descriptors compare equal).
bool same_op(const OpDesc& a, const OpDesc& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using Op = std::decay_t<decltype(x)>;
        if constexpr (requires { x == x; })
          return x == std::get<Op>(b);
        else
          return false;  // not a product op: never timed alone
      },
      a);
}

// One op planned on its own buffers, which it releases.
class AloneOp {
 public:
  explicit AloneOp(Backend& backend) : backend_(backend) {}
  ~AloneOp() {
    for (const Buffer& buffer : buffers_) backend_.release(buffer);
    if (workspace_.bytes > 0) backend_.release(workspace_);
  }
  AloneOp(const AloneOp&) = delete;
  AloneOp& operator=(const AloneOp&) = delete;

  Status setup(const OpDesc& desc, std::uint64_t seed) {
    TB_RETURN_IF_ERROR(backend_.plan(desc, &plan_));
    const std::vector<OperandSpec>& specs = plan_->operands();
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const OperandSpec& spec = specs[i];
      Buffer buffer;
      TB_RETURN_IF_ERROR(backend_.allocate(spec.bytes, &buffer));
      buffers_.push_back(buffer);
      if (spec.is_output && !spec.reads_previous()) continue;
      const int index = static_cast<int>(i);
      if (spec.dtype == DType::i32) {
        const std::vector<std::int32_t> values(spec.elements(), integer_fill(desc));
        TB_RETURN_IF_ERROR(backend_.import_operand(*plan_, index, values.data(), buffer));
        continue;
      }
      const Status filled = backend_.fill_operand(*plan_, index, buffer, seed + i);
      if (filled.code() != StatusCode::unimplemented) {
        TB_RETURN_IF_ERROR(filled);
        continue;
      }
      TB_RETURN_IF_ERROR(import_floats(
          backend_, *plan_, index, counter_values(spec.elements(), seed + i, spec.dtype), buffer));
    }
    if (plan_->workspace_bytes() > 0)
      TB_RETURN_IF_ERROR(backend_.allocate(plan_->workspace_bytes(), &workspace_));
    return Status::Ok();
  }

  // Median of `reps` timed executions after one untimed.
  Status time(int reps, double* seconds) {
    TB_RETURN_IF_ERROR(backend_.execute(*plan_, buffers_, workspace_));
    backend_.synchronize();
    std::unique_ptr<Timer> timer = backend_.make_timer();
    std::vector<double> samples;
    for (int r = 0; r < reps; ++r) {
      timer->start();
      TB_RETURN_IF_ERROR(backend_.execute(*plan_, buffers_, workspace_));
      timer->stop();
      const double elapsed = timer->elapsed_seconds();
      if (!std::isfinite(elapsed)) return Status::Failed("the timer could not time the op");
      samples.push_back(elapsed);
    }
    std::sort(samples.begin(), samples.end());
    *seconds = samples[samples.size() / 2];
    return Status::Ok();
  }

 private:
  Backend& backend_;
  std::unique_ptr<Plan> plan_;
  std::vector<Buffer> buffers_;
  Buffer workspace_;
};

}  // namespace

Status time_product_ops_alone(Backend& backend, const std::vector<LayerProductOp>& ops,
                              std::size_t layers, std::uint64_t seed,
                              const StandaloneTiming& timing, std::vector<double>* seconds) {
  seconds->assign(layers, 0.0);
  std::vector<std::pair<OpDesc, double>> timed;  // each distinct descriptor once
  for (const LayerProductOp& op : ops) {
    auto known = std::find_if(timed.begin(), timed.end(),
                              [&](const auto& entry) { return same_op(entry.first, op.desc); });
    if (known == timed.end()) {
      AloneOp alone(backend);
      double median = 0;
      const Status status = [&] {
        TB_RETURN_IF_ERROR(alone.setup(op.desc, seed));
        return alone.time(timing.reps, &median);
      }();
      if (!status.ok())
        return Status::Failed(fmt::format("{} alone: {}", op_name(op.desc), status.message()));
      timed.emplace_back(op.desc, median);
      known = timed.end() - 1;
    }
    seconds->at(static_cast<std::size_t>(op.layer)) += known->second;
  }
  return Status::Ok();
}

}  // namespace tb
