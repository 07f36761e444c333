// peak: the arithmetic ceiling, measured by the backend's register-resident FMA probe.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "workloads/kind_registry.h"

namespace tb {
namespace {

const WorkloadKind& peak_kind();  // the key table, with the factory below

class PeakWorkload final : public OpWorkload {
 public:
  explicit PeakWorkload(PeakOp op) : op_(op) {}

  Descriptor descriptor() const override {
    return canonical_descriptor(peak_kind(), {{"dtype", std::string(dtype_name(op_.dtype))},
                                              {"iterations", std::to_string(op_.iterations)}});
  }
  DType dtype() const override { return op_.dtype; }
  Headline headline() const override { return {"tflops", "TFLOP/s", ""}; }
  WorkCounts counts() const override {
    WorkCounts counts;
    counts.flops = plan_ ? plan_->flops_per_execution() : 0;  // the probe defines its own work
    return counts;
  }
  std::uint64_t device_bytes() const override { return 1 << 16; }

  Status setup(Backend& backend, std::uint64_t) override { return plan_and_allocate(backend, op_); }

  Validation validate() override {
    Validation result;
    result.method = "every thread's accumulators equal iterations x increment exactly";
    Status status = run();
    std::vector<double> per_thread;
    if (status.ok()) status = export_doubles("per_worker", &per_thread);
    if (!status.ok()) {
      result.message = status.message();
      return result;
    }
    const double expected =
        static_cast<double>(op_.iterations) * peak_increment_per_iteration(op_.dtype);
    for (double value : per_thread)
      result.error = std::max(result.error, std::fabs(value - expected));
    result.checked = static_cast<std::int64_t>(per_thread.size());
    result.passed = result.error == 0;
    if (!result.passed)
      result.message = fmt::format("accumulators off by {} from {}", result.error, expected);
    return result;
  }

 private:
  PeakOp op_;
};

const WorkloadKind& peak_kind() {
  static const WorkloadKind kind{
      "peak",
      "measured arithmetic peak (FMA / bf16 dot-product probe)",
      {choice_key("dtype", "f32", {"f32", "bf16", "f16", "tf32", "f8_e4m3"},
                  "the arithmetic probed"),
       {.name = "iterations",
        .type = KeyType::integer,
        .fallback = std::to_string(PeakOp{}.iterations),
        .max = kPeakMaxIterations,
        .help = fmt::format("rounds of every chain, at most {} (the probe stays exact)",
                            kPeakMaxIterations)}}};
  return kind;
}

std::unique_ptr<Workload> make_peak(const Descriptor& descriptor) {
  DescriptorReader reader(descriptor, peak_kind());
  PeakOp op;
  op.dtype = parse_dtype(reader.choice("dtype"));
  op.iterations = reader.integer("iterations");
  reader.reject_unknown_keys();
  return std::make_unique<PeakWorkload>(op);
}

}  // namespace

KindEntry peak_kind_entry() {
  return {{peak_kind()},
          [](const Descriptor& descriptor, const DeviceInfo&) { return make_peak(descriptor); }};
}

}  // namespace tb
