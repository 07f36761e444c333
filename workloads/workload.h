// A Workload: what is measured, set up on one backend. It knows its work (FLOPs, bytes moved,
// items), sets itself up outside any timed region, runs one timed unit, and validates its
// output against a reference on an untimed run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/communicator.h"
#include "backends/numeric.h"
#include "backends/reference/reference.h"
#include "backends/seeded.h"
#include "workloads/descriptor.h"

namespace tb {

// Work done by one timed unit. Each formula is written once, in the workload that owns it.
struct WorkCounts {
  double flops = 0;   // floating-point operations (a multiply-add counts 2)
  double bytes = 0;   // minimum bytes moved to and from memory
  double items = 0;   // samples (images, sequences) processed, for samples/s
  double tokens = 0;  // tokens processed (sequence models), for tokens/s
  // Collectives, in nccl-tests' terms: the size it prints (bytes), algbw = that / time, and
  // busbw = algbw x bus_factor (bus_bandwidth_factor in workloads/collective.h). 0: not a
  // collective.
  double collective_bytes = 0;
  double bus_factor = 0;
};

struct Validation {
  bool passed = false;
  std::string method;        // how the output was checked
  double error = 0;          // worst normalized error found (ops: in error_scale units)
  double tolerance = 0;      // what the dtype allows (ops: kErrorTolerance)
  std::int64_t checked = 0;  // outputs compared against the reference
  std::string message;       // why it failed
};

// The figure a result is read by, set by its workload: one of its metrics (or of its details,
// for a time to train), the unit, and the report-wide headline it competes for (the best per
// backend across a report: `compare`'s headline lines; empty: none).
struct Headline {
  std::string metric;  // "tflops", "gbps", "samples_per_s", "time_to_train_s"
  std::string unit;    // "TFLOP/s", "GB/s", "samples/s", "s"
  std::string figure;  // "GEMM f32", kMemoryBandwidthFigure, ...
  bool lower_is_better = false;
};
// The figure of the memory bandwidth (STREAM): the roofline's roof, summary's bandwidth.
inline constexpr const char* kMemoryBandwidthFigure = "memory bandwidth";

// One op of a case that runs a reference kernel, and its share of the case's time where an
// instrumented run measured it.
struct ReferenceKernelUse {
  std::string op;  // "layer4.0.conv2 conv backward_weights", or the op kind of a one-op case
  std::string implementation;
  std::optional<double> share_of_time;
};

class Workload {
 public:
  virtual ~Workload() = default;

  // Canonical descriptor: every key with its resolved value, so it reproduces the case.
  virtual Descriptor descriptor() const = 0;
  // The dtype the work is done in, which decides the peak it is held against.
  virtual DType dtype() const = 0;
  virtual WorkCounts counts() const = 0;
  virtual Headline headline() const = 0;
  // Device memory setup will allocate, checked before allocating.
  virtual std::uint64_t device_bytes() const = 0;

  // The ranks the case runs across (backends/communicator.h), given by the runner before setup:
  // collective and data-parallel workloads keep it and make their communicator in setup; the
  // rest run on each rank on their own and ignore it.
  virtual void join(World& world) { (void)world; }
  // Plan, allocate, fill inputs with seeded random data. Untimed.
  virtual Status setup(Backend& backend, std::uint64_t seed) = 0;
  // One timed unit.
  virtual Status run() = 0;
  // Runs the unit once more, untimed, and checks it against the reference.
  virtual Validation validate() = 0;
  // After validation, untimed, a stage of its own: where a unit's time goes (a model's per-layer
  // breakdown, its products alone, its data-parallel timings). A failure fails the case.
  virtual Status time_breakdown() { return Status::Ok(); }
  // True when a unit reads what it writes (GEMM with beta != 0): the harness then restores
  // the inputs with reset() before every sample and times one unit per sample.
  virtual bool output_feeds_back() const { return false; }
  virtual Status reset() { return Status::Ok(); }
  // True for a workload that times itself (time-to-train: long runs, each with its own clock
  // around the region that counts): the harness calls run() once, without warm-up, and
  // reports own_samples() (one per run that produced a time).
  virtual bool times_itself() const { return false; }
  virtual std::vector<double> own_samples() const { return {}; }

  virtual std::string implementation() const = 0;
  virtual std::string math_mode() const = 0;
  // The ops whose plans run reference kernels (known once set up), never silently reported.
  virtual std::vector<ReferenceKernelUse> reference_kernels() const = 0;
  virtual bool emulates_bf16() const = 0;
  // What a model workload knows beyond its time (parameters, memory, per-layer breakdown),
  // recorded with the result; null for single-op workloads.
  virtual nlohmann::json details() const { return nullptr; }
};

// Plain float values into operand `operand` of `plan`, converted to its dtype.
Status import_floats(Backend& backend, const Plan& plan, int operand,
                     const std::vector<float>& values, Buffer buffer);

// A workload that is one planned op: owns the plan, its operand buffers and workspace.
class OpWorkload : public Workload {
 public:
  ~OpWorkload() override;
  Status run() override;
  std::string implementation() const override;
  std::string math_mode() const override;
  std::vector<ReferenceKernelUse> reference_kernels() const override;
  bool emulates_bf16() const override;

 protected:
  // Plans `op` on `backend` and allocates every operand and the workspace.
  Status plan_and_allocate(Backend& backend, const OpDesc& op);
  // Operands by the names their op declares (backends/operands.h), never by position.
  int operand_at(std::string_view name) const;
  const Buffer& buffer(std::string_view name) const;
  Status import(std::string_view name, const std::vector<float>& values);     // floats -> dtype
  Status export_floats(std::string_view name, std::vector<float>* values);    // dtype -> floats
  Status export_doubles(std::string_view name, std::vector<double>* values);  // exact, any dtype
  // Overwrites an output with NaN, so an element the op never writes cannot pass validation.
  Status poison(std::string_view name);

  Backend* backend_ = nullptr;
  std::unique_ptr<Plan> plan_;
  std::vector<Buffer> buffers_;
  Buffer workspace_;
};

// Validation's rule, written once (the reasoning is in workload.cpp and docs/architecture.md):
// an output's error |got - exact| is measured in units of its own rounding-error scale,
//   accumulation(k) x ||terms||_2 + output unit x |exact|,
// and a case passes when the worst checked output is within kErrorTolerance of those units.
// `reduction` is k, the number of terms summed per output; `accumulation` how the product adds
// them up, `inputs` the dtype it multiplies in.
enum class Accumulation {
  fp32,             // fp32 additions, each rounded: CPU libraries, CUDA cores
  tensor_core,      // MMA instructions of k_mma products into fp32 (TF32, bf16, f16 inputs)
  fp8_tensor_core,  // FP8: about 14 bits between promotions to fp32
};
// k_mma, the products one Hopper MMA instruction sums: 8 TF32, 16 bf16 or f16; 1 otherwise.
std::int64_t mma_depth(DType inputs);
cpu::ErrorScale error_scale(DType output, std::int64_t reduction,
                            Accumulation accumulation = Accumulation::fp32,
                            DType inputs = DType::f32);
inline constexpr double kErrorTolerance = 1.0;
// The verdict of a GEMM or convolution check: the worst of the sampled outputs' error and the
// probe's, against result->tolerance, with the message that names both.
void judge_sampled_and_probe(double sampled, double probe, Validation* result);

// Checks that every value is finite and that they are not all zero.
template <typename T>  // float or double
Validation check_finite_and_nonzero(const std::vector<T>& values);

}  // namespace tb
