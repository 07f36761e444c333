// stream: McCalpin's STREAM kernels over arrays far larger than the last-level cache.
#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "backends/cpu_kernels/stream.h"
#include "workloads/kind_registry.h"

namespace tb {
namespace {

const WorkloadKind& stream_kind();  // the key table, with the factory below

constexpr const char* kKernelNames[] = {"copy", "scale", "add", "triad", "dot"};

class StreamWorkload final : public OpWorkload {
 public:
  explicit StreamWorkload(StreamOp op) : op_(op) {}

  Descriptor descriptor() const override {
    return canonical_descriptor(stream_kind(), {{"op", kKernelNames[static_cast<int>(op_.kernel)]},
                                                {"n", std::to_string(op_.n)}});
  }
  DType dtype() const override { return DType::f64; }
  Headline headline() const override { return {"gbps", "GB/s", kMemoryBandwidthFigure}; }

  WorkCounts counts() const override {
    WorkCounts counts;
    counts.bytes = cpu::stream_bytes(op_);  // as STREAM counts: each array access once
    const double n = static_cast<double>(op_.n);
    switch (op_.kernel) {
      case StreamKernel::copy:
        break;
      case StreamKernel::scale:
      case StreamKernel::add:
        counts.flops = n;
        break;
      case StreamKernel::triad:
      case StreamKernel::dot:
        counts.flops = 2 * n;
        break;
    }
    return counts;
  }

  std::uint64_t device_bytes() const override { return 3 * static_cast<std::uint64_t>(op_.n) * 8; }

  Status setup(Backend& backend, std::uint64_t seed) override {
    TB_RETURN_IF_ERROR(plan_and_allocate(backend, op_));
    seed_ = seed;
    // Arrays are many GiB: values come from a counter-based generator, written and later
    // replayed chunk by chunk, so no host copy of the arrays is ever held.
    std::vector<double> chunk(kChunk);
    for (int array = 0; array < 3; ++array)
      for (std::int64_t begin = 0; begin < op_.n; begin += kChunk) {
        const std::int64_t count = std::min(kChunk, op_.n - begin);
        fill_initial(array, begin, count, chunk.data());
        TB_RETURN_IF_ERROR(backend.upload(chunk.data(), slice(kArrays[array], begin, count),
                                          count * sizeof(double)));
      }
    return Status::Ok();
  }

  Validation validate() override {
    Validation result;
    result.method =
        "exact replay of every element on the host (triad: with its multiply-add fused or not)";
    Status status = run();
    if (status.ok() && op_.kernel == StreamKernel::dot) status = validate_dot(&result);
    if (status.ok() && op_.kernel != StreamKernel::dot) status = validate_elements(&result);
    if (!status.ok()) result.message = status.message();
    return result;
  }

 private:
  // The arrays by name, in the order their seeds number them.
  static constexpr const char* kArrays[] = {"a", "b", "c"};

  const char* output_operand() const {
    switch (op_.kernel) {
      case StreamKernel::copy:
      case StreamKernel::add:
        return "c";
      case StreamKernel::scale:
        return "b";
      case StreamKernel::triad:
        return "a";
      case StreamKernel::dot:
        return "result";
    }
    return "";
  }

  static constexpr std::int64_t kChunk = std::int64_t{1} << 20;

  // Initial value of element i of array a (0), b (1) or c (2): uniform in [-1, 1).
  double initial(int array, std::int64_t i) const {
    const std::uint64_t key =
        seed_ ^ (static_cast<std::uint64_t>(array + 1) << 56) ^ static_cast<std::uint64_t>(i);
    const std::uint64_t z = mix64(key + kGoldenGamma);
    return static_cast<double>(z >> 11) * 0x1p-52 - 1.0;
  }

  void fill_initial(int array, std::int64_t begin, std::int64_t count, double* out) const {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) out[i] = initial(array, begin + i);
  }

  Buffer slice(std::string_view operand, std::int64_t begin, std::int64_t count) const {
    return {static_cast<double*>(buffer(operand).data) + begin,
            static_cast<std::size_t>(count) * sizeof(double)};
  }

  double expected(std::int64_t i) const {
    const double s = op_.scalar;
    switch (op_.kernel) {
      case StreamKernel::copy:
        return initial(0, i);
      case StreamKernel::scale:
        return s * initial(2, i);
      case StreamKernel::add:
        return initial(0, i) + initial(1, i);
      case StreamKernel::triad:
        return initial(1, i) + s * initial(2, i);
      case StreamKernel::dot:
        break;
    }
    return 0;
  }

  // Triad's multiply-add may be fused (one rounding, as the avx2 / avx512 levels compute it)
  // or not (two): the output must equal one of the two replays in every element, so a single
  // element off by one ulp still fails.
  double expected_fused(std::int64_t i) const {
    return op_.kernel == StreamKernel::triad ? std::fma(op_.scalar, initial(2, i), initial(1, i))
                                             : expected(i);
  }

  Status validate_elements(Validation* result) {
    const char* output = output_operand();
    std::vector<double> chunk(kChunk);
    std::int64_t mismatches = 0, fused_mismatches = 0, first = -1, fused_first = -1;
    for (std::int64_t begin = 0; begin < op_.n; begin += kChunk) {
      const std::int64_t count = std::min(kChunk, op_.n - begin);
      TB_RETURN_IF_ERROR(
          backend_->download(slice(output, begin, count), chunk.data(), count * sizeof(double)));
#pragma omp parallel for schedule(static) reduction(+ : mismatches, fused_mismatches)
      for (std::int64_t i = 0; i < count; ++i) {
        mismatches += chunk[i] != expected(begin + i);
        fused_mismatches += chunk[i] != expected_fused(begin + i);
      }
      for (std::int64_t i = 0; i < count && (first < 0 || fused_first < 0); ++i) {
        if (first < 0 && chunk[i] != expected(begin + i)) first = begin + i;
        if (fused_first < 0 && chunk[i] != expected_fused(begin + i)) fused_first = begin + i;
      }
    }
    if (fused_mismatches < mismatches) {
      mismatches = fused_mismatches;
      first = fused_first;
    }
    result->checked = op_.n;
    result->error = static_cast<double>(mismatches);
    result->passed = mismatches == 0;
    if (!result->passed)
      result->message =
          fmt::format("{} of {} elements differ, first at {}", mismatches, op_.n, first);
    return Status::Ok();
  }

  // The only kernel whose summation order differs from a serial replay: checked against an
  // fp64 sum with a tolerance.
  Status validate_dot(Validation* result) {
    double got = 0;
    TB_RETURN_IF_ERROR(backend_->download(buffer("result"), &got, sizeof(got)));
    double sum = 0, squares = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum, squares)
    for (std::int64_t i = 0; i < op_.n; ++i) {
      const double term = initial(0, i) * initial(1, i);
      sum += term;
      squares += term * term;
    }
    result->tolerance = kErrorTolerance;
    result->error = error_scale(DType::f64, op_.n).error(got, {sum, squares});
    result->checked = 1;
    result->passed = result->error <= result->tolerance;
    if (!result->passed) result->message = fmt::format("dot {} differs from {}", got, sum);
    return Status::Ok();
  }

  StreamOp op_;
  std::uint64_t seed_ = 0;
};

const WorkloadKind& stream_kind() {
  static const WorkloadKind kind{
      "stream",
      "STREAM memory bandwidth (copy, scale, add, triad, dot), GB/s as STREAM counts",
      {choice_key("op", "triad",
                  std::vector<std::string>(std::begin(kKernelNames), std::end(kKernelNames)),
                  "the STREAM kernel"),
       {.name = "n",
        .type = KeyType::integer,
        .derived = "an array of 4x the last-level cache (at least 64 MiB, at most 1/8 of memory)",
        .help = "elements (doubles) per array"}}};
  return kind;
}

std::unique_ptr<Workload> make_stream(const Descriptor& descriptor, const DeviceInfo& device) {
  DescriptorReader reader(descriptor, stream_kind());
  StreamOp op;
  const std::string kernel = reader.choice("op");
  op.kernel = static_cast<StreamKernel>(
      std::find(std::begin(kKernelNames), std::end(kKernelNames), kernel) -
      std::begin(kKernelNames));
  // Each array at least 4x the last-level cache (STREAM's rule), and never under 64 MiB. The
  // CPU backends report the sum of the distinct last-level caches their threads use (every L3
  // of a many-CCX or two-socket host), not one instance. A cache figure that would put the
  // three arrays past 3/8 of memory (a VM listing each vCPU's own copy of the host's L3) is
  // capped there, so the default still fits.
  const std::uint64_t cache = device.details.value("last_level_cache_bytes", std::uint64_t{0});
  std::uint64_t array_bytes = std::max<std::uint64_t>(4 * cache, 64u << 20);
  if (device.memory_bytes > 0)
    array_bytes =
        std::min(array_bytes, std::max<std::uint64_t>(device.memory_bytes / 8, 64u << 20));
  const std::int64_t default_n = static_cast<std::int64_t>(array_bytes / 8);
  op.n = reader.integer_or("n", default_n);
  reader.checked_product({op.n, 3, 8}, "3 arrays of n doubles");
  reader.reject_unknown_keys();
  return std::make_unique<StreamWorkload>(op);
}

}  // namespace

KindEntry stream_kind_entry() {
  return {{stream_kind()}, &make_stream};
}

}  // namespace tb
