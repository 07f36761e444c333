#include "workloads/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "backends/low_precision.h"
#include "backends/operands.h"

namespace tb {

OpWorkload::~OpWorkload() {
  if (!backend_) return;
  for (const Buffer& buffer : buffers_) backend_->release(buffer);
  backend_->release(workspace_);
}

Status OpWorkload::plan_and_allocate(Backend& backend, const OpDesc& op) {
  backend_ = &backend;
  TB_RETURN_IF_ERROR(backend.plan(op, &plan_));
  for (const OperandSpec& spec : plan_->operands()) {
    Buffer buffer;
    TB_RETURN_IF_ERROR(
        spec.memory == MemoryKind::device
            ? backend.allocate(spec.bytes, &buffer)
            : backend.allocate_host(spec.bytes, spec.memory == MemoryKind::host_pinned, &buffer));
    buffers_.push_back(buffer);
  }
  if (plan_->workspace_bytes() > 0)
    TB_RETURN_IF_ERROR(backend.allocate(plan_->workspace_bytes(), &workspace_));
  return Status::Ok();
}

Status OpWorkload::run() {
  return backend_->execute(*plan_, buffers_, workspace_);
}

std::vector<ReferenceKernelUse> OpWorkload::reference_kernels() const {
  if (!plan_ || !plan_->is_reference()) return {};
  return {{descriptor().kind(), plan_->implementation(), 1.0}};
}

bool OpWorkload::emulates_bf16() const {
  return plan_ && plan_->emulates_bf16();
}

std::string OpWorkload::implementation() const {
  return plan_ ? plan_->implementation() : "";
}
std::string OpWorkload::math_mode() const {
  return plan_ ? plan_->math_mode() : "";
}

int OpWorkload::operand_at(std::string_view name) const {
  return operand_index(plan_->operands(), name);
}

const Buffer& OpWorkload::buffer(std::string_view name) const {
  return buffers_.at(static_cast<std::size_t>(operand_at(name)));
}

// Conversions of more values than this run on every thread (a product's inputs at a large
// batch hold gigabytes).
constexpr std::int64_t kParallelConversion = std::int64_t{1} << 16;

Status import_floats(Backend& backend, const Plan& plan, int operand,
                     const std::vector<float>& values, Buffer buffer) {
  const DType dtype = plan.operands().at(operand).dtype;
  switch (dtype) {
    case DType::f32:
      return backend.import_operand(plan, operand, values.data(), buffer);
    case DType::bf16:
    case DType::f16: {
      std::vector<std::uint16_t> bits(values.size());
      const auto count = static_cast<std::int64_t>(values.size());
#pragma omp parallel for schedule(static) if (count > kParallelConversion)
      for (std::int64_t i = 0; i < count; ++i)
        bits[i] =
            dtype == DType::bf16 ? cpu::float_to_bf16(values[i]) : cpu::float_to_f16(values[i]);
      return backend.import_operand(plan, operand, bits.data(), buffer);
    }
    case DType::f64: {
      const std::vector<double> wide(values.begin(), values.end());
      return backend.import_operand(plan, operand, wide.data(), buffer);
    }
    case DType::f8_e4m3: {
      std::vector<std::uint8_t> bits(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) bits[i] = cpu::float_to_f8_e4m3(values[i]);
      return backend.import_operand(plan, operand, bits.data(), buffer);
    }
    default:
      return Status::Unimplemented(fmt::format("no host conversion for {}", dtype_name(dtype)));
  }
}

Status OpWorkload::import(std::string_view name, const std::vector<float>& values) {
  const int operand = operand_at(name);
  return import_floats(*backend_, *plan_, operand, values, buffers_[operand]);
}

Status OpWorkload::export_floats(std::string_view name, std::vector<float>* values) {
  const int operand = operand_at(name);
  const OperandSpec& spec = plan_->operands().at(operand);
  const std::size_t count = spec.elements();
  values->resize(count);
  switch (spec.dtype) {
    case DType::f32:
      return backend_->export_operand(*plan_, operand, buffers_[operand], values->data());
    case DType::bf16:
    case DType::f16: {
      std::vector<std::uint16_t> bits(count);
      TB_RETURN_IF_ERROR(backend_->export_operand(*plan_, operand, buffers_[operand], bits.data()));
      const auto n = static_cast<std::int64_t>(count);
#pragma omp parallel for schedule(static) if (n > kParallelConversion)
      for (std::int64_t i = 0; i < n; ++i)
        (*values)[i] =
            spec.dtype == DType::bf16 ? cpu::bf16_to_float(bits[i]) : cpu::f16_to_float(bits[i]);
      return Status::Ok();
    }
    default:
      return Status::Unimplemented(fmt::format("no host conversion for {}", dtype_name(spec.dtype)))
          .because(ReasonCode::dtype_unsupported);
  }
}

Status OpWorkload::export_doubles(std::string_view name, std::vector<double>* values) {
  const int operand = operand_at(name);
  const OperandSpec& spec = plan_->operands().at(operand);
  if (spec.dtype == DType::f64) {
    values->resize(spec.elements());
    return backend_->export_operand(*plan_, operand, buffers_[operand], values->data());
  }
  std::vector<float> narrow;
  TB_RETURN_IF_ERROR(export_floats(name, &narrow));
  values->assign(narrow.begin(), narrow.end());
  return Status::Ok();
}

Status OpWorkload::poison(std::string_view name) {
  // All-ones bytes are a NaN in every floating-point format used here.
  const Buffer& output = buffer(name);
  const std::vector<unsigned char> nan_bytes(output.bytes, 0xff);
  return backend_->upload(nan_bytes.data(), output, nan_bytes.size());
}

std::int64_t mma_depth(DType inputs) {
  return inputs == DType::tf32 ? 8 : inputs == DType::bf16 || inputs == DType::f16 ? 16 : 1;
}

cpu::ErrorScale error_scale(DType output, std::int64_t reduction, Accumulation accumulation,
                            DType inputs) {
  // Validation's rule. Inputs are seeded uniform values in [-1, 1) with random signs, already
  // rounded to the input dtype, so an output's exact value is known in fp64 and what differs
  // is rounding: each addition of the accumulation rounds by up to one unit u_acc of the
  // running sum, and random-signed rounding errors add up like a random walk. Measured per
  // output against the L2 norm of its terms, ||t||_2 = sqrt(sum_k (a_ik b_kj)^2) (not the sum
  // of |terms|, which grows like k and hides a precision downgrade at large k):
  //  - one running sum over k terms errs by about u_acc sqrt(k / 6) ||t||_2 (partial sums of
  //    size sqrt(i) ||t||_2 / sqrt(k), each rounded);
  //  - every library blocks its reductions (k tiles in registers, then added into the output,
  //    or split-k): a block of B terms summed, then k / B block sums, errs by about
  //    u_acc sqrt((B + k / B) / 6) ||t||_2.
  // The allowance is kAccumulation u_acc sqrt(min(k, block) + k / block) ||t||_2 +
  // kOutput u_out |exact|, u_out the output dtype's unit roundoff: the first term is the
  // one-running-sum bound up to `block` terms and the blocked bound beyond (a single running
  // sum over far more than `block` terms exceeds it, as no library we ship does). Against it
  // (docs/architecture.md, "Validation", has the measured table):
  //  - fp32 with TF32 inputs errs by about 2^-12 ||t||_2 per output, bf16 inputs by 2^-9;
  //  - one k-tile of 128 left out by sqrt(128 / k) ||t||_2;
  //  - one element 0.1% off by 1e-3 |exact|, about 1e-3 ||t||_2 for a typical element;
  // while the allowance at k = 65,536 is about 6e-5 ||t||_2 and at k = 802,816 (ResNet-50's
  // largest backward-weights reduction in the suites) 8e-5 ||t||_2. Measured (test_workloads,
  // Backends/Margins): each damage 10x above it and the libraries' worst error 10x below,
  // except oneDNN's backward weights, whose long running sums leave only 90x between its
  // worst error (0.22) and TF32 inputs (20x). An output stored in bf16 or f16 rounds by up to
  // u_out |exact|, a quarter of its part of the allowance, so there the library reaches 0.25
  // and a 0.1% element or tile is below the output's own resolution.
  // FP8 Tensor Cores keep about 14 bits between promotions to fp32 (measured on Hopper by
  // DeepSeek-V3's authors): the unit is taken as 2^-13 whether cuBLASLt promotes often
  // (accum=exact) or seldom (fast). On an H200, accum=exact at k = 512 erred by 5.3 units of
  // the fp32 rule. That allowance (12% of ||t||_2 at k = 8192) cannot separate a k-tile left
  // out at large k.
  // Hopper's Tensor Cores (cuBLASLt's TF32 and 16-bit GEMMs, fp32 accumulation) add each MMA
  // instruction's k_mma products (8 TF32, 16 bf16 or f16) into the fp32 accumulator with an
  // error of one sign, not a random one: the H200's worst errors grew linearly with k, 0.19,
  // 0.75, 1.44 and 3.08 units of the rule above at k = 1024 to 16,384 (TF32), 0.67 at 8192 (bf16
  // inputs), all about 1.4 x 2^-24 x k / k_mma ||t||_2, as a truncation per instruction of a
  // running sum of size ||t||_2 would give. There the allowance adds kMma 2^-24 k / k_mma
  // ||t||_2: 3x the largest measured error, a k-tile left out stays 22x above it up to k =
  // 65,536, a typical element 0.1% off 3.3x at k = 8192 (TF32; docs/architecture.md, "The error
  // rule").
  // f64 (the reference's own loops: one running sum) is held to the running-sum bound at every
  // k; its damages are ten orders of magnitude above it.
  constexpr double kAccumulation = 30, kOutput = 4, kMma = 4;
  const bool fp8 = accumulation == Accumulation::fp8_tensor_core;
  const double block = output == DType::f64 ? INFINITY : 1024;
  const double accumulator = output == DType::f64 ? 0x1p-53 : fp8 ? 0x1p-13 : 0x1p-24;
  const double rounding = unit_roundoff(output);
  const double k = static_cast<double>(std::max<std::int64_t>(reduction, 1));
  double scale = kAccumulation * accumulator * std::sqrt(std::min(k, block) + k / block);
  if (accumulation == Accumulation::tensor_core)
    scale += kMma * 0x1p-24 * k / static_cast<double>(mma_depth(inputs));
  return {scale, kOutput * rounding};
}

void judge_sampled_and_probe(double sampled, double probe, Validation* result) {
  result->error = std::max(sampled, probe);
  result->passed = result->error <= result->tolerance;
  if (!result->passed)
    result->message = fmt::format("error {:.3g} (sampled {:.3g}, probe {:.3g}) exceeds {:.3g}",
                                  result->error, sampled, probe, result->tolerance);
}

template <typename T>
Validation check_finite_and_nonzero(const std::vector<T>& values) {
  Validation result;
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      result.message =
          fmt::format("output element {} is {} (unwritten or overflowed)", i, values[i]);
      return result;
    }
    nonzero += values[i] != 0;
  }
  if (nonzero == 0) {
    result.message = "output is all zeros";
    return result;
  }
  result.passed = true;
  return result;
}

template Validation check_finite_and_nonzero(const std::vector<float>&);
template Validation check_finite_and_nonzero(const std::vector<double>&);

}  // namespace tb
