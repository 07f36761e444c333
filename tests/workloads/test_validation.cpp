// Validation must be able to fail: wrong, unwritten and all-zero outputs are caught. A
// decorator around a real CPU backend damages the output after the real op ran.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "backends/registry.h"
#include "workloads/registry.h"

namespace tb {
namespace {

class DamagingBackend final : public Backend {
 public:
  using Damage = std::function<void(std::span<const Buffer>)>;
  DamagingBackend(Backend& real, Damage damage, bool skip_op)
      : real_(real), damage_(std::move(damage)), skip_op_(skip_op) {}

  std::string name() const override { return real_.name(); }
  DeviceInfo device_info() const override { return real_.device_info(); }
  Status allocate(std::size_t bytes, Buffer* out) override { return real_.allocate(bytes, out); }
  Status allocate_host(std::size_t bytes, bool pinned, Buffer* out) override {
    return real_.allocate_host(bytes, pinned, out);
  }
  void release(Buffer buffer) override { real_.release(buffer); }
  Status upload(const void* host, Buffer device, std::size_t bytes) override {
    return real_.upload(host, device, bytes);
  }
  Status download(Buffer device, void* host, std::size_t bytes) override {
    return real_.download(device, host, bytes);
  }
  void synchronize() override { real_.synchronize(); }
  Status flush_caches() override { return real_.flush_caches(); }
  std::unique_ptr<Timer> make_timer() override { return real_.make_timer(); }
  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override { return real_.plan(op, out); }
  Status import_operand(const Plan& plan, int index, const void* plain, Buffer device) override {
    return real_.import_operand(plan, index, plain, device);
  }
  Status export_operand(const Plan& plan, int index, Buffer device, void* plain) override {
    return real_.export_operand(plan, index, device, plain);
  }
  Status execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) override {
    if (!skip_op_) TB_RETURN_IF_ERROR(real_.execute(plan, operands, workspace));
    if (damage_) damage_(operands);
    return Status::Ok();
  }

 private:
  Backend& real_;
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
    const Validation v = validate_with("gemm m=64", [element](std::span<const Buffer> ops) {
      static_cast<float*>(ops[2].data)[element] += 0.5f;
    });
    EXPECT_FALSE(v.passed) << element;
    EXPECT_GT(v.error, v.tolerance);
  }
}

TEST_F(ValidationCatches, ASlightlyWrongGemm) {
  // Every output 1e-3 off (relative): far beyond fp32 rounding.
  const Validation v = validate_with("gemm m=96 n=80 k=200 ta=t", [](std::span<const Buffer> ops) {
    float* c = static_cast<float*>(ops[2].data);
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
  const Validation v = validate_with(line, [](std::span<const Buffer> ops) {
    float* dst = static_cast<float*>(ops[3].data);
    for (std::size_t i = 0; i < ops[3].bytes / sizeof(float); ++i) dst[i] += 0.05f;
  });
  EXPECT_FALSE(v.passed);
}

TEST_F(ValidationCatches, AnAllZeroOutput) {
  const Validation v = validate_with("gemm m=32", [](std::span<const Buffer> ops) {
    std::memset(ops[2].data, 0, 32 * 32 * sizeof(float));
  });
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.message, "output is all zeros");
}

TEST_F(ValidationCatches, OneWrongStreamElement) {
  const Validation v = validate_with("stream op=triad n=100000", [](std::span<const Buffer> ops) {
    static_cast<double*>(ops[0].data)[77777] =
        std::nextafter(static_cast<double*>(ops[0].data)[77777], 2.0);
  });
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.message.find("first at 77777"), std::string::npos) << v.message;
}

TEST_F(ValidationCatches, AWrongDot) {
  const Validation v = validate_with("stream op=dot n=100000", [](std::span<const Buffer> ops) {
    *static_cast<double*>(ops[3].data) *= 1.000001;
  });
  EXPECT_FALSE(v.passed);
}

TEST_F(ValidationCatches, AWrongPeakAccumulator) {
  const Validation v = validate_with("peak iterations=100", [](std::span<const Buffer> ops) {
    static_cast<double*>(ops[0].data)[0] += 1.0 / 4096;
  });
  EXPECT_FALSE(v.passed);
}

}  // namespace
}  // namespace tb
