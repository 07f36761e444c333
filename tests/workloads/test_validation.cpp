// Validation must be able to fail: wrong, unwritten and all-zero outputs are caught. A
// decorator around a real CPU backend damages the output after the real op ran.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "backends/low_precision.h"
#include "backends/operands.h"
#include "backends/reference/reference_backend.h"
#include "backends/registry.h"
#include "tests/forwarding_backend.h"
#include "workloads/registry.h"

namespace tb {
namespace {

class DamagingBackend final : public testing_support::ForwardingBackend {
 public:
  using Damage = std::function<void(const BoundOperands&)>;
  DamagingBackend(Backend& real, Damage damage, bool skip_op)
      : ForwardingBackend(real), damage_(std::move(damage)), skip_op_(skip_op) {}

  Status execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) override {
    if (!skip_op_) TB_RETURN_IF_ERROR(real_.execute(plan, operands, workspace));
    if (damage_) damage_(BoundOperands(plan.operands(), operands));
    return Status::Ok();
  }

 private:
  Damage damage_;
  bool skip_op_;
};

class ValidationCatches : public testing::Test {
 protected:
  void SetUp() override {
    const BackendEntry* entry = find_backend("cpu-onednn");
    if (!entry) GTEST_SKIP() << "cpu-onednn is not in this build";
    ASSERT_TRUE(entry->create(BackendConfig{}, &real_).ok());
  }

  Validation validate_with(const std::string& line, DamagingBackend::Damage damage,
                           bool skip_op = false) {
    DamagingBackend backend(*real_, std::move(damage), skip_op);
    auto workload = create_workload(Descriptor::parse(line), real_->device_info());
    EXPECT_TRUE(workload->setup(backend, 99).ok());
    return workload->validate();
  }

  std::unique_ptr<Backend> real_;
};

TEST_F(ValidationCatches, TheUndamagedCasePasses) {
  EXPECT_TRUE(validate_with("gemm m=64", nullptr).passed);
}

TEST_F(ValidationCatches, OneWrongGemmElement) {
  for (int element : {0, 63 * 64 + 63, 1000}) {
    const Validation v = validate_with(
        "gemm m=64", [element](const BoundOperands& ops) { ops.out<float>("c")[element] += 0.5f; });
    EXPECT_FALSE(v.passed) << element;
    EXPECT_GT(v.error, v.tolerance);
  }
}

TEST_F(ValidationCatches, ASlightlyWrongGemm) {
  // Every output 1e-3 off (relative): far beyond fp32 rounding.
  const Validation v = validate_with("gemm m=96 n=80 k=200 ta=t", [](const BoundOperands& ops) {
    float* c = ops.out<float>("c");
    for (int i = 0; i < 96 * 80; ++i) c[i] *= 1.001f;
  });
  EXPECT_FALSE(v.passed);
}

TEST_F(ValidationCatches, AnUnwrittenOutput) {
  const Validation v = validate_with("gemm m=32", nullptr, /*skip_op=*/true);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.message.find("unwritten"), std::string::npos) << v.message;
  EXPECT_FALSE(validate_with("conv mb=2 ic=8 ih=9 oc=8 kh=3 ph=1", nullptr, true).passed);
}

TEST_F(ValidationCatches, AConvolutionEpilogueOffByABias) {
  // Every output 0.05 higher, as a bias added twice would leave it: ReLU's zeros included.
  const char* line = "conv mb=2 ic=8 ih=9 oc=8 kh=3 ph=1 epilogue=bias_relu";
  EXPECT_TRUE(validate_with(line, nullptr).passed);
  const Validation v = validate_with(line, [](const BoundOperands& ops) {
    float* dst = ops.out<float>("dst");
    for (std::size_t i = 0; i < ops.buffer("dst").bytes / sizeof(float); ++i) dst[i] += 0.05f;
  });
  EXPECT_FALSE(v.passed);
}

TEST_F(ValidationCatches, AnAllZeroOutput) {
  const Validation v = validate_with("gemm m=32", [](const BoundOperands& ops) {
    std::memset(ops.out<float>("c"), 0, 32 * 32 * sizeof(float));
  });
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.message, "output is all zeros");
}

TEST_F(ValidationCatches, OneWrongStreamElement) {
  const Validation v = validate_with("stream op=triad n=100000", [](const BoundOperands& ops) {
    double* a = ops.out<double>("a");  // triad's output
    a[77777] = std::nextafter(a[77777], 2.0);
  });
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.message.find("first at 77777"), std::string::npos) << v.message;
}

TEST_F(ValidationCatches, AWrongDot) {
  const Validation v = validate_with("stream op=dot n=100000", [](const BoundOperands& ops) {
    *ops.out<double>("result") *= 1.000001;
  });
  EXPECT_FALSE(v.passed);
}

TEST_F(ValidationCatches, AWrongPeakAccumulator) {
  const Validation v = validate_with("peak iterations=100", [](const BoundOperands& ops) {
    ops.out<double>("per_worker")[0] += 1.0 / 4096;
  });
  EXPECT_FALSE(v.passed);
}

// --- The damages of issue 19, on every backend, at three sizes, with their margins ----------
//
// A PlanDamagingBackend runs the real op with damaged inputs (precision downgrades, a k-tile
// of 128 zeroed) or damages the output afterwards (one element or a 16x16 tile 0.1% off, a
// constant output, the bias added twice), all through the plan's plain operands, so it works
// on device memory and blocked layouts alike. Each case prints the real library's worst error
// and each damage's, in units of the tolerance, and asserts the margins on both sides.

enum class Damage { none, tf32_inputs, bf16_inputs, k_tile, element, tile, constant, bias };

const char* damage_name(Damage damage) {
  switch (damage) {
    case Damage::none:
      return "library";
    case Damage::tf32_inputs:
      return "tf32 inputs";
    case Damage::bf16_inputs:
      return "bf16 inputs";
    case Damage::k_tile:
      return "k-tile left out";
    case Damage::element:
      return "element 0.1%";
    case Damage::tile:
      return "16x16 tile 0.1%";
    case Damage::constant:
      return "constant";
    case Damage::bias:
      return "bias twice";
  }
  return "?";
}

class PlanDamagingBackend final : public testing_support::ForwardingBackend {
 public:
  PlanDamagingBackend(Backend& real, Damage damage) : ForwardingBackend(real), damage_(damage) {}

  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override {
    op_ = op;
    return real_.plan(op, out);
  }

  Status execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) override {
    // The product's two inputs (GEMM's a and b; a convolution's by direction) and its output,
    // by their declaration; a bias aside.
    const std::vector<OperandSpec>& specs = plan.operands();
    std::vector<int> inputs;
    int output = -1;
    for (int i = 0; i < static_cast<int>(specs.size()); ++i)
      if (specs[i].is_output)
        output = i;
      else if (specs[i].name != "bias")
        inputs.push_back(i);
    const int first = inputs.at(0), second = inputs.at(1);
    std::vector<double> in0, in1, c0;
    TB_RETURN_IF_ERROR(read(plan, first, operands, &in0));
    TB_RETURN_IF_ERROR(read(plan, second, operands, &in1));
    const GemmOp* gemm = std::get_if<GemmOp>(&op_);
    if (gemm && gemm->beta != 0) TB_RETURN_IF_ERROR(read(plan, output, operands, &c0));
    if (damage_ == Damage::tf32_inputs || damage_ == Damage::bf16_inputs ||
        damage_ == Damage::k_tile) {
      std::vector<double> d0 = in0, d1 = in1;
      if (damage_ == Damage::k_tile) {
        drop_k_tile(&d0, &d1);
      } else {
        for (auto* values : {&d0, &d1})
          for (double& v : *values)
            v = damage_ == Damage::tf32_inputs ? cpu::round_to_tf32(static_cast<float>(v))
                                               : cpu::round_to_bf16(static_cast<float>(v));
      }
      TB_RETURN_IF_ERROR(write(plan, first, operands, d0));
      TB_RETURN_IF_ERROR(write(plan, second, operands, d1));
    }
    TB_RETURN_IF_ERROR(real_.execute(plan, operands, workspace));
    real_.synchronize();
    TB_RETURN_IF_ERROR(write(plan, first, operands, in0));  // restored for the next run
    TB_RETURN_IF_ERROR(write(plan, second, operands, in1));
    if (damage_ < Damage::element) return Status::Ok();

    std::vector<double> out;
    TB_RETURN_IF_ERROR(read(plan, output, operands, &out));
    double squares = 0;
    for (double v : out) squares += v * v;
    const double rms = std::sqrt(squares / static_cast<double>(out.size()));
    // Away from the corners, which the sampled check always compares: the element 0.1% off is
    // a typical one (the first from a third of the way in whose size is at least the rms), the
    // tile starts a third of the way down and across.
    std::size_t typical = out.size() / 3;
    while (typical + 1 < out.size() && std::fabs(out[typical]) < rms) ++typical;
    const auto& dims = specs[output].dims;
    const std::int64_t columns = dims.back(),
                       rows = static_cast<std::int64_t>(out.size()) / columns;
    const std::int64_t row0 = rows / 3, column0 = columns > 16 ? columns / 3 : 0;
    switch (damage_) {
      case Damage::element:
        out[typical] *= 1.001;
        break;
      case Damage::tile:  // rows and columns of the output as a matrix (conv: W innermost)
        for (std::int64_t r = row0; r < std::min<std::int64_t>(row0 + 16, rows); ++r)
          for (std::int64_t c = column0; c < std::min<std::int64_t>(column0 + 16, columns); ++c)
            out[r * columns + c] *= 1.001;
        break;
      case Damage::constant:
        std::fill(out.begin(), out.end(), rms);
        break;
      case Damage::bias:
        if (gemm) {  // beta C0 added twice
          for (std::size_t i = 0; i < out.size(); ++i) out[i] += gemm->beta * c0[i];
        } else {  // the conv epilogue's bias added twice
          std::vector<double> bias;
          TB_RETURN_IF_ERROR(read(plan, operand_index(specs, "bias"), operands, &bias));
          const std::int64_t plane = dims[2] * dims[3];
          for (std::size_t i = 0; i < out.size(); ++i)
            out[i] += bias[(static_cast<std::int64_t>(i) / plane) % dims[1]];
        }
        break;
      default:
        break;
    }
    return write(plan, output, operands, out);
  }

 private:
  Status read(const Plan& plan, int index, std::span<const Buffer> operands,
              std::vector<double>* values) {
    const OperandSpec& spec = plan.operands()[index];
    values->resize(spec.elements());
    if (spec.dtype == DType::f64)
      return real_.export_operand(plan, index, operands[index], values->data());
    std::vector<float> narrow(spec.elements());
    if (spec.dtype == DType::f32) {
      TB_RETURN_IF_ERROR(real_.export_operand(plan, index, operands[index], narrow.data()));
    } else if (spec.dtype == DType::bf16 || spec.dtype == DType::f16) {
      std::vector<std::uint16_t> bits(spec.elements());
      TB_RETURN_IF_ERROR(real_.export_operand(plan, index, operands[index], bits.data()));
      for (std::size_t i = 0; i < bits.size(); ++i)
        narrow[i] =
            spec.dtype == DType::bf16 ? cpu::bf16_to_float(bits[i]) : cpu::f16_to_float(bits[i]);
    } else {
      return Status::Unimplemented("the damaging backend reads f32, bf16, f16 and f64 only");
    }
    values->assign(narrow.begin(), narrow.end());
    return Status::Ok();
  }
  Status write(const Plan& plan, int index, std::span<const Buffer> operands,
               const std::vector<double>& values) {
    const OperandSpec& spec = plan.operands()[index];
    if (spec.dtype == DType::f64)
      return real_.import_operand(plan, index, values.data(), operands[index]);
    if (spec.dtype == DType::bf16 || spec.dtype == DType::f16) {
      std::vector<std::uint16_t> bits(values.size());
      for (std::size_t i = 0; i < bits.size(); ++i)
        bits[i] = spec.dtype == DType::bf16 ? cpu::float_to_bf16(static_cast<float>(values[i]))
                                            : cpu::float_to_f16(static_cast<float>(values[i]));
      return real_.import_operand(plan, index, bits.data(), operands[index]);
    }
    const std::vector<float> narrow(values.begin(), values.end());
    return real_.import_operand(plan, index, narrow.data(), operands[index]);
  }

  // Zeroes 128 terms of every output's reduction (all of them where it is shorter).
  void drop_k_tile(std::vector<double>* in0, std::vector<double>* in1) const {
    constexpr std::int64_t kTile = 128;
    if (const auto* g = std::get_if<GemmOp>(&op_)) {
      for (std::int64_t batch = 0; batch < g->batch; ++batch)
        for (std::int64_t i = 0; i < g->m; ++i)
          for (std::int64_t kk = 0; kk < std::min(kTile, g->k); ++kk)
            (*in0)[batch * g->m * g->k + (g->trans_a ? kk * g->m + i : i * g->k + kk)] = 0;
      return;
    }
    const auto& c = std::get<ConvOp>(op_);
    const std::int64_t taps = c.kh * c.kw, channels = (kTile + taps - 1) / taps;
    switch (c.direction) {
      case ConvDirection::forward:  // weights OIHW: input channels [0, channels)
        for (std::int64_t oc = 0; oc < c.oc; ++oc)
          for (std::int64_t ic = 0; ic < std::min(channels, c.ic); ++ic)
            for (std::int64_t t = 0; t < taps; ++t) (*in1)[(oc * c.ic + ic) * taps + t] = 0;
        break;
      case ConvDirection::backward_data:  // weights OIHW: output channels [0, channels)
        std::fill(in1->begin(), in1->begin() + std::min(channels, c.oc) * c.ic * taps, 0.0);
        break;
      case ConvDirection::backward_weights: {  // diff_dst: the first 128 positions of image 0
        const std::int64_t plane = c.oh() * c.ow();
        for (std::int64_t oc = 0; oc < c.oc; ++oc)
          for (std::int64_t p = 0; p < std::min(kTile, plane * c.mb); ++p) {
            const std::int64_t n = p / plane, q = p % plane;
            (*in1)[(n * c.oc + oc) * plane + q] = 0;
          }
        break;
      }
    }
  }

  Damage damage_;
  OpDesc op_;
};

struct MarginCase {
  const char* line;
  bool every_output;  // checked on every output (or a probe that sees one element)
  bool has_bias;
  // The library this much below the tolerance and each damage this much above it: 10 unless
  // the case says why not. The library's side depends on the kernel the CPU gets.
  double library_margin = 10;
  double damage_margin = 10;
};

class Margins : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()) == "f64 reference") {
      real_ = cpu::make_host_reference_backend();
      return;
    }
    const BackendEntry* entry = find_backend(GetParam());
    if (!entry) GTEST_SKIP() << GetParam() << " is not in this build";
    const auto probe = entry->probe();
    if (!probe.usable) GTEST_SKIP() << GetParam() << " is not usable here: " << probe.reason;
    ASSERT_TRUE(entry->create(BackendConfig{}, &real_).ok());
  }

  // Validates `line` undamaged and with each damage; prints the errors in units of the
  // tolerance and asserts the case's margins on both sides.
  // Outputs stored in bf16 or f16 round by 2^-9 or 2^-12 of their size: one element or a tile
  // 0.1% off is then at or below their own resolution and not asserted.
  void expect_margins(const MarginCase& c, DType inputs, DType output = DType::f32) {
    std::string row = fmt::format("{:<16} {:<78}", GetParam(), c.line);
    for (Damage damage : {Damage::none, Damage::tf32_inputs, Damage::bf16_inputs, Damage::k_tile,
                          Damage::element, Damage::tile, Damage::constant, Damage::bias}) {
      if (damage == Damage::bias && !c.has_bias) continue;
      if (damage == Damage::tf32_inputs && inputs != DType::f32 && inputs != DType::f64) continue;
      if (damage == Damage::bf16_inputs && inputs == DType::bf16) continue;
      const bool below_resolution = (output == DType::bf16 || output == DType::f16) &&
                                    (damage == Damage::element || damage == Damage::tile);
      if (below_resolution) continue;
      PlanDamagingBackend backend(*real_, damage);
      auto workload = create_workload(Descriptor::parse(c.line), real_->device_info());
      const Status setup = workload->setup(backend, 99);
      if (setup.code() == StatusCode::unimplemented) {
        std::printf("%s | unimplemented: %s\n", row.c_str(), setup.message().c_str());
        return;
      }
      ASSERT_TRUE(setup.ok()) << setup.message();
      const Validation v = workload->validate();
      // A check that failed before comparing (an all-zero output) carries no error: infinite.
      const double ratio = v.passed || v.error > 0 ? v.error / v.tolerance : INFINITY;
      row += fmt::format(" | {} {:.3g}", damage_name(damage), ratio);
      const bool sampled_only =
          !c.every_output && (damage == Damage::element || damage == Damage::tile);
      if (damage == Damage::none) {
        EXPECT_TRUE(v.passed) << c.line << ": " << v.message;
        EXPECT_LE(ratio, 1 / c.library_margin) << c.line << " (" << v.method << ")";
      } else if (sampled_only) {
        row += " (sampled)";
      } else {
        EXPECT_FALSE(v.passed) << c.line << ": " << damage_name(damage);
        EXPECT_GE(ratio, c.damage_margin)
            << c.line << ": " << damage_name(damage) << " (" << v.method << ")";
      }
    }
    std::printf("%s\n", row.c_str());
  }

  std::unique_ptr<Backend> real_;
};

const MarginCase kGemmF32[] = {
    {"gemm m=96 n=80 k=200 ta=t alpha=0.5 beta=0.25", true, true},
    {"gemm m=1024 n=768 k=3072 tb=t name=bert.ffn2", true, false},
    {"gemm m=2048 ta=t tb=t alpha=0.5 beta=0.25", true, true},
    {"gemm m=64 n=64 k=65536 beta=0.25", true, true},
};
const MarginCase kConvF32[] = {
    {"conv mb=2 ic=8 ih=9 oc=8 kh=3 ph=1 dir=fwd epilogue=bias", true, true},
    {"conv mb=2 ic=8 ih=9 oc=8 kh=3 ph=1 dir=bwd_data", true, false},
    {"conv mb=2 ic=8 ih=9 oc=8 kh=3 ph=1 dir=bwd_weights", true, false},
    // oneDNN's AVX2 kernel sums an output's 576 terms in one running sum: 0.11 of the tolerance
    // on every output (0.04 with AVX-512), every damage 27x above: 5x below, 10x above.
    {"conv name=layer1.conv2 mb=1 ic=64 ih=56 oc=64 kh=3 ph=1 dir=fwd epilogue=bias", true, true,
     5},
    {"conv name=layer1.conv2 mb=1 ic=64 ih=56 oc=64 kh=3 ph=1 dir=bwd_data", true, false},
    // oneDNN sums backward weights in long running sums: 0.2 (batch 1) and 0.22 (batch 16, with
    // AVX-512) or 0.33 (AVX2) of the tolerance; every damage 13x above it or more.
    {"conv name=layer1.conv2 mb=1 ic=64 ih=56 oc=64 kh=3 ph=1 dir=bwd_weights", true, false, 4},
    {"conv name=layer1.conv2 mb=16 ic=64 ih=56 oc=64 kh=3 ph=1 dir=fwd", true, false},
    {"conv name=layer1.conv2 mb=16 ic=64 ih=56 oc=64 kh=3 ph=1 dir=bwd_data", true, false},
    {"conv name=layer1.conv2 mb=16 ic=64 ih=56 oc=64 kh=3 ph=1 dir=bwd_weights", true, false, 2.5},
};

TEST_P(Margins, GemmF32) {
  if (std::string(GetParam()) == "f64 reference") GTEST_SKIP() << "f32 runs on the libraries";
  for (const MarginCase& c : kGemmF32) expect_margins(c, DType::f32);
}

TEST_P(Margins, ConvF32) {
  if (std::string(GetParam()) == "f64 reference") GTEST_SKIP() << "f32 runs on the libraries";
  for (const MarginCase& c : kConvF32) expect_margins(c, DType::f32);
}

TEST_P(Margins, F64) {
  if (std::string(GetParam()) != "f64 reference") GTEST_SKIP() << "f64 runs on the reference";
  for (const MarginCase& c :
       {MarginCase{"gemm m=96 n=80 k=200 dtype=f64 out=f64 ta=t beta=0.25", true, true},
        MarginCase{"gemm m=64 n=64 k=65536 dtype=f64 out=f64 beta=0.25", true, true},
        MarginCase{"conv mb=2 ic=8 ih=9 oc=8 kh=3 ph=1 dir=bwd_weights dtype=f64", true, false}})
    expect_margins(c, DType::f64);
}

// bf16 runs on cpu-onednn here (cpu-openblas has no bf16 GEMM on Debian's 0.3.21); tf32 and
// f16 on cuda only. A backend without the dtype prints "unimplemented" for the case.
TEST_P(Margins, LowPrecision) {
  if (std::string(GetParam()) == "f64 reference") GTEST_SKIP() << "low precision runs on libraries";
  expect_margins({"gemm m=1024 n=768 k=3072 tb=t dtype=bf16", true, false}, DType::bf16);
  expect_margins({"gemm m=64 n=64 k=65536 dtype=bf16 beta=0.25", true, true}, DType::bf16);
  // A bf16 (f16) output rounds by up to 2^-8 (2^-11) of itself, a quarter of the tolerance's
  // output part (4 u_out): the library reaches 0.25 of the tolerance, so 3x on both sides is
  // what the output's own resolution leaves (one element or a tile 0.1% off is below it).
  expect_margins({"conv name=layer1.conv2 mb=16 ic=64 ih=56 oc=64 kh=3 ph=1 dir=fwd dtype=bf16",
                  true, false, 3, 3},
                 DType::bf16, DType::bf16);
  expect_margins({"gemm m=2048 dtype=tf32", true, false}, DType::tf32);
  expect_margins({"gemm m=64 n=64 k=65536 dtype=tf32", true, false}, DType::tf32);
  expect_margins({"gemm m=2048 dtype=f16 out=f16", true, false, 3, 3}, DType::f16, DType::f16);
  expect_margins({"gemm m=2048 dtype=bf16 out=bf16", true, false, 3, 3}, DType::bf16, DType::bf16);
}

INSTANTIATE_TEST_SUITE_P(Backends, Margins,
                         testing::Values("cpu-onednn", "cpu-openblas", "cuda", "f64 reference"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// The rule itself, for the dtypes that only a GPU runs: the allowance stays between the
// libraries' expected error and the damages at every k the suites hold.
TEST(ErrorRule, SeparatesAtEveryReduction) {
  for (std::int64_t k : {1, 16, 128, 1024, 4096, 65536, 802816}) {
    const double kd = static_cast<double>(k);
    // Per ||t||_2: f32 accumulation in blocks of up to 1024 terms, 5 sigma (of millions).
    const double accumulation = error_scale(DType::f32, k).accumulation;
    const double blocked = 0x1p-24 * std::sqrt((std::min(kd, 1024.0) + kd / 1024) / 6);
    EXPECT_LE(5 * blocked, 0.1 * accumulation) << k;
    EXPECT_GE(4 * 0x1p-12, accumulation) << k;  // TF32 inputs: the worst of 256 outputs
    EXPECT_GE(1e-3, 10 * accumulation) << k;    // one typical element 0.1% off
    EXPECT_GE(std::sqrt(128 / kd), 10 * accumulation) << k;  // a k-tile of 128 left out
    // f64: the running-sum bound at every k, far below any damage.
    EXPECT_LE(error_scale(DType::f64, k).accumulation, 1e-6 * 1e-3) << k;
  }
  // bf16 / f16 outputs: their own rounding dominates; fast FP8 accumulation is looser.
  EXPECT_EQ(error_scale(DType::bf16, 64).output, 4 * 0x1p-8);
  EXPECT_EQ(error_scale(DType::f16, 64).output, 4 * 0x1p-11);
  EXPECT_GT(error_scale(DType::bf16, 64, Accumulation::fp8_tensor_core).accumulation,
            1000 * error_scale(DType::bf16, 64).accumulation);
}

// Tensor Core accumulation (TF32 and 16-bit inputs on a GPU): the allowance follows the H200's
// measured k / k_mma growth with room above its worst errors, and still fails a k-tile left out.
TEST(ErrorRule, TensorCoreAccumulationGrowsWithKOverKmma) {
  EXPECT_EQ(mma_depth(DType::tf32), 8);
  EXPECT_EQ(mma_depth(DType::bf16), 16);
  EXPECT_EQ(mma_depth(DType::f16), 16);
  // The H200's worst errors in units of the fp32 rule (bench/results/h200): TF32 at k = 1024 to
  // 16,384, bf16 inputs with fp32 output at 8192.
  const std::vector<std::tuple<DType, std::int64_t, double>> measured = {{DType::tf32, 1024, 0.19},
                                                                         {DType::tf32, 4096, 0.75},
                                                                         {DType::tf32, 8192, 1.44},
                                                                         {DType::tf32, 16384, 3.08},
                                                                         {DType::bf16, 8192, 0.67}};
  for (const auto& [inputs, k, units] : measured) {
    const double error = units * error_scale(DType::f32, k).accumulation;  // per ||t||_2
    const double allowed =
        error_scale(DType::f32, k, Accumulation::tensor_core, inputs).accumulation;
    EXPECT_LE(error, allowed / 3) << dtype_name(inputs) << " k " << k;
  }
  for (DType inputs : {DType::tf32, DType::bf16, DType::f16})
    for (std::int64_t k : {64, 1024, 8192, 16384, 65536}) {
      const double kd = static_cast<double>(k);
      const double allowed =
          error_scale(DType::f32, k, Accumulation::tensor_core, inputs).accumulation;
      EXPECT_GE(allowed, error_scale(DType::f32, k).accumulation) << k;
      EXPECT_GE(allowed, 2.5 * 1.4 * 0x1p-24 * kd / mma_depth(inputs)) << k;  // the model, 2.5x
      EXPECT_GE(std::sqrt(128 / kd), 20 * allowed) << k;  // a k-tile of 128 left out
      if (k <= 8192) {                                    // one typical element 0.1% off
        EXPECT_GE(1e-3, 3 * allowed) << k;
      }
    }
}

}  // namespace
}  // namespace tb
