// gemm: C = alpha * op(A) op(B) + beta * C through the backend's GEMM.
#include "workloads/kind_registry.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "backends/reference/reference.h"

namespace tb {
namespace {

const WorkloadKind& gemm_kind();  // the key table, with the factory below

constexpr int kSampledOutputs = 256;
// Multiply-adds the probe may spend (2 per row, column group and k): 2^30 (batch m k groups)
// is about 1 s on two cores of this machine.
constexpr std::int64_t kProbeBudget = std::int64_t{1} << 30;
constexpr std::int64_t kProbeDoubles = std::int64_t{1} << 24;  // 128 MiB

class GemmWorkload final : public OpWorkload {
 public:
  GemmWorkload(GemmOp op, std::string name) : op_(op), name_(std::move(name)) {}

  Descriptor descriptor() const override {
    std::map<std::string, std::string> values = {
        {"name", name_},
        {"m", std::to_string(op_.m)},
        {"n", std::to_string(op_.n)},
        {"k", std::to_string(op_.k)},
        {"batch", std::to_string(op_.batch)},
        {"dtype", std::string(dtype_name(op_.a_type))},
        {"out", std::string(dtype_name(op_.c_type))},
        {"ta", op_.trans_a ? "t" : "n"},
        {"tb", op_.trans_b ? "t" : "n"},
        {"alpha", fmt::format("{:g}", op_.alpha)},
        {"beta", fmt::format("{:g}", op_.beta)},
        {"layout", op_.prepacked_b ? "prepacked" : "plain"}};
    if (op_.a_type == DType::f8_e4m3) values["accum"] = op_.fast_accumulation ? "fast" : "exact";
    return canonical_descriptor(gemm_kind(), values);
  }

  DType dtype() const override { return op_.a_type; }
  Headline headline() const override {
    return {"tflops", "TFLOP/s", fmt::format("GEMM {}", dtype_name(op_.a_type))};
  }

  WorkCounts counts() const override {
    const double batch = static_cast<double>(op_.batch);
    const double m = static_cast<double>(op_.m), n = static_cast<double>(op_.n),
                 k = static_cast<double>(op_.k);
    WorkCounts counts;
    counts.flops = product_flops(op_);
    // A and B read once, C written once (and read once more when beta != 0).
    counts.bytes = batch * (m * k * dtype_size(op_.a_type) + k * n * dtype_size(op_.b_type) +
                            m * n * dtype_size(op_.c_type) * (op_.beta != 0 ? 2 : 1));
    return counts;
  }

  std::uint64_t device_bytes() const override { return static_cast<std::uint64_t>(counts().bytes); }

  Status setup(Backend& backend, std::uint64_t seed) override {
    TB_RETURN_IF_ERROR(plan_and_allocate(backend, op_));
    a_ = random_values(static_cast<std::size_t>(op_.batch * op_.m * op_.k), seed, op_.a_type);
    b_ = random_values(static_cast<std::size_t>(op_.batch * op_.k * op_.n), seed + 1, op_.b_type);
    c0_ = random_values(static_cast<std::size_t>(op_.batch * op_.m * op_.n), seed + 2, op_.c_type);
    seed_ = seed;
    TB_RETURN_IF_ERROR(import("a", a_));
    TB_RETURN_IF_ERROR(import("b", b_));
    return import("c", c0_);
  }

  bool output_feeds_back() const override { return op_.beta != 0; }
  Status reset() override { return import("c", c0_); }

  Validation validate() override {
    Status status = op_.beta != 0 ? reset() : poison("c");
    if (status.ok()) status = run();
    std::vector<double> c;
    if (status.ok()) status = export_doubles("c", &c);
    if (status.ok() && op_.beta != 0) status = reset();
    if (!status.ok()) return {false, "", 0, 0, 0, status.message()};

    Validation result = check_finite_and_nonzero(c);
    // Column groups for the probe: as many as kProbeBudget multiply-adds allow, so a case
    // small enough (batch m n k <= kProbeBudget, about 1 s here) is compared with its fp64
    // reference on every output.
    // The probe holds two groups x k arrays of doubles: at most kProbeDoubles each.
    const std::int64_t groups = std::clamp<std::int64_t>(
        std::min(kProbeBudget / std::max<std::int64_t>(op_.batch * op_.m * op_.k, 1),
                 kProbeDoubles / op_.k),
        1, op_.n);
    result.method =
        groups == op_.n
            ? std::string("fp64 reference on every output, NaN-poisoned output")
            : fmt::format(
                  "Freivalds probe on every row in {} column groups of {} (one element off by "
                  "e error scales moves its group by e/{:.3g}) and fp64 reference on {} sampled "
                  "outputs, NaN-poisoned output",
                  groups, (op_.n + groups - 1) / groups,
                  std::sqrt(static_cast<double>(op_.n) / groups), kSampledOutputs);
    result.tolerance = kErrorTolerance;
    if (!result.passed) return result;

    const cpu::ErrorScale scale = error_scale(op_.c_type, op_.k, accumulation(), op_.a_type);
    std::mt19937_64 rng(seed_ + 3);
    double worst = 0;
    for (int sample = 0; sample < kSampledOutputs && groups < op_.n; ++sample) {
      // The first two samples are the corners; the rest are random.
      const std::int64_t batch = sample == 1 ? op_.batch - 1 : sample == 0 ? 0 : rng() % op_.batch;
      const std::int64_t i = sample == 1 ? op_.m - 1 : sample == 0 ? 0 : rng() % op_.m;
      const std::int64_t j = sample == 1 ? op_.n - 1 : sample == 0 ? 0 : rng() % op_.n;
      const cpu::ReferenceValue ref =
          cpu::gemm_reference(op_, a_.data(), b_.data(), c0_.data(), batch, i, j);
      worst = std::max(
          worst, scale.error(c[static_cast<std::size_t>((batch * op_.m + i) * op_.n + j)], ref));
    }
    const double probe = cpu::gemm_probe_error(op_, a_.data(), b_.data(), c0_.data(), c.data(),
                                               groups, scale, seed_ + 4);
    result.checked =
        groups == op_.n ? op_.batch * op_.m * op_.n : kSampledOutputs + op_.batch * op_.m * groups;
    judge_sampled_and_probe(worst, probe, &result);
    return result;
  }

 private:
  // cuBLASLt runs TF32 and 16-bit inputs on Tensor Cores; CPU libraries add in rounded fp32.
  Accumulation accumulation() const {
    if (op_.a_type == DType::f8_e4m3) return Accumulation::fp8_tensor_core;
    const bool reduced_inputs =
        op_.a_type == DType::tf32 || op_.a_type == DType::bf16 || op_.a_type == DType::f16;
    return reduced_inputs && backend_->device_info().kind == "gpu" ? Accumulation::tensor_core
                                                                   : Accumulation::fp32;
  }

  GemmOp op_;
  std::string name_;
  std::uint64_t seed_ = 0;
  std::vector<float> a_, b_, c0_;  // plain row-major inputs, rounded to their dtypes
};

const WorkloadKind& gemm_kind() {
  static const WorkloadKind kind{
      "gemm",
      "matrix multiply C = alpha op(A) op(B) + beta C",
      {label_key(), required_integer_key("m", "rows of op(A) and C"),
       integer_like_key("n", "m", "columns of op(B) and C"),
       integer_like_key("k", "m", "columns of op(A), rows of op(B)"),
       omitted_at_default(integer_key("batch", "1", "independent multiplies of the same shape")),
       choice_key("dtype", "f32", {"f32", "bf16", "f16", "tf32", "f8_e4m3", "f64"},
                  "type of A and B (tf32: f32 data, TF32 math)"),
       choice_key("out", "f32", {"f32", "bf16", "f16", "f64"}, "type of C"),
       choice_key("ta", "n", {"n", "t"}, "A transposed"),
       choice_key("tb", "n", {"n", "t"}, "B transposed"),
       number_key("alpha", "1", "scale of op(A) op(B)", kScale),
       number_key("beta", "0", "scale of C added", kScale),
       choice_key("layout", "plain", {"plain", "prepacked"},
                  "prepacked: B reordered into the library's layout outside the timed region"),
       choice_key("accum", "exact", {"exact", "fast"},
                  "FP8 only (dtype=f8_e4m3): fast: Tensor Core accumulation without periodic "
                  "promotion to fp32"),
       shapes_key()}};
  return kind;
}

std::unique_ptr<Workload> make_gemm(const Descriptor& descriptor) {
  DescriptorReader reader(descriptor, gemm_kind());
  GemmOp op;
  const std::string name = reader.text("name");
  op.m = reader.integer("m");
  op.n = reader.integer("n");
  op.k = reader.integer("k");
  op.batch = reader.integer("batch");
  reader.checked_product({op.batch, op.m, op.n, op.k, 8}, "batch x m x n x k x 8");
  op.a_type = op.b_type = parse_dtype(reader.choice("dtype"));
  op.c_type = parse_dtype(reader.choice("out"));
  op.trans_a = reader.choice("ta") == "t";
  op.trans_b = reader.choice("tb") == "t";
  op.fast_accumulation = reader.choice("accum") == "fast";
  if (op.fast_accumulation && op.a_type != DType::f8_e4m3)
    throw UsageError("gemm: accum=fast is an FP8 option (dtype=f8_e4m3)");
  op.alpha = static_cast<float>(reader.number("alpha"));
  op.beta = static_cast<float>(reader.number("beta"));
  op.prepacked_b = reader.choice("layout") == "prepacked";
  reader.reject_unknown_keys();
  return std::make_unique<GemmWorkload>(op, name);
}

}  // namespace

KindEntry gemm_kind_entry() {
  return {{gemm_kind()},
          [](const Descriptor& descriptor, const DeviceInfo&) { return make_gemm(descriptor); }};
}

}  // namespace tb
