// The CUDA backend's device-independent pieces, on the CPU: per-element kernel math, grid
// sizing, and the backend's behaviour where no GPU is usable.
#include <gtest/gtest.h>

#include "backends/cuda/nvml.h"

#include <cmath>

#include "backends/cuda/stream_math.h"
#include "backends/registry.h"
#include "workloads/registry.h"

namespace tb::cuda {
namespace {

TEST(CudaStreamMath, MatchesTheHostReplayBitForBit) {
  // The stream workload replays b + s * c on the host; the kernel must round the same way.
  // Volatile: the compiler must not fold or fuse the host-side expectations either.
  volatile double a = 0.1, b = 0.7, c = 1.0 / 41, s = 3.0;
  EXPECT_EQ(stream_element(StreamKernel::copy, a, b, c, s), a);
  EXPECT_EQ(stream_element(StreamKernel::scale, a, b, c, s), s * c);
  EXPECT_EQ(stream_element(StreamKernel::add, a, b, c, s), a + b);
  const double product = s * c, triad = b + product;
  EXPECT_EQ(stream_element(StreamKernel::triad, a, b, c, s), triad);
  EXPECT_NE(triad, std::fma(s, c, b));  // a fused multiply-add would differ here
  EXPECT_EQ(stream_element(StreamKernel::dot, a, b, c, s), a * b);
}

TEST(CudaStreamMath, GridFillsTheDeviceButNotMore) {
  EXPECT_EQ(stream_grid(1, 132, 256, 4), 1);                // tiny: one block
  EXPECT_EQ(stream_grid(256 * 10, 132, 256, 4), 10);        // all the work it needs
  EXPECT_EQ(stream_grid(1LL << 30, 132, 256, 4), 132 * 4);  // capped at the resident blocks
  EXPECT_EQ(stream_grid(0, 132, 256, 4), 1);
}

TEST(CudaBackend, UnusableWithoutAGpuSaysWhy) {
  const BackendEntry* entry = find_backend("cuda");
  if (!entry) GTEST_SKIP() << "the cuda backend is not in this build";
  const Availability availability = entry->probe();
  if (availability.usable) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(availability.reason.empty());
  std::unique_ptr<Backend> backend;
  const Status created = entry->create(BackendConfig{}, &backend);
  EXPECT_EQ(created.code(), StatusCode::unavailable);
  EXPECT_EQ(backend, nullptr);
}

// On a GPU: the backend's own kernels against the references (skipped without one).
TEST(CudaBackend, KernelsValidateOnAGpu) {
  const BackendEntry* entry = find_backend("cuda");
  if (!entry || !entry->probe().usable) GTEST_SKIP() << "no usable GPU here";
  std::unique_ptr<Backend> backend;
  ASSERT_TRUE(entry->create(BackendConfig{}, &backend).ok());
  for (const char* line : {"stream op=copy n=1001",
                           "stream op=scale n=4Mi",
                           "stream op=add n=7",
                           "stream op=triad n=1Mi",
                           "stream op=dot n=1000001",
                           "transfer dir=h2d bytes=8Mi",
                           "transfer dir=d2h bytes=8 memory=pageable",
                           "transfer dir=d2d bytes=1Mi",
                           "peak dtype=f32 iterations=1000",
                           "peak dtype=bf16 iterations=1000",
                           "peak dtype=f16 iterations=4096",
                           "peak dtype=tf32 iterations=999",
                           "gemm m=7 n=1000 k=13",
                           "gemm m=256 dtype=tf32 ta=t",
                           "gemm m=129 n=65 k=300 dtype=bf16 tb=t",
                           "gemm m=64 dtype=f16 out=f16",
                           "gemm m=32 n=48 k=16 batch=3 alpha=0.5 beta=0.25",
                           "gemm m=256 n=128 k=512 dtype=f8_e4m3 tb=t out=bf16",
                           "gemm m=256 dtype=f8_e4m3 tb=t accum=fast",
                           "conv mb=2 ic=16 ih=14 oc=32 kh=3 ph=1",
                           "conv mb=2 ic=16 ih=14 oc=32 kh=3 ph=1 dir=bwd_data dtype=bf16",
                           "conv mb=2 ic=16 ih=15 oc=8 kh=3 sh=2 dir=bwd_weights dtype=tf32",
                           "conv mb=2 ic=3 ih=32 oc=8 kh=7 sh=2 ph=3 dir=bwd_weights dtype=f16",
                           "conv mb=2 ic=16 ih=14 oc=32 kh=3 ph=1 epilogue=bias",
                           "conv mb=2 ic=16 ih=14 oc=32 kh=3 ph=1 epilogue=bias_relu dtype=bf16"}) {
    auto workload = create_workload(Descriptor::parse(line), backend->device_info());
    const Status status = workload->setup(*backend, 5);
    const bool fp8 = std::string_view(line).find("f8_e4m3") != std::string_view::npos;
    if (fp8 && status.code() == StatusCode::unimplemented) {  // before compute capability 8.9
      std::printf("%s: %s\n", line, status.message().c_str());
      continue;
    }
    ASSERT_TRUE(status.ok()) << line << ": " << status.message();
    const Validation validation = workload->validate();
    EXPECT_TRUE(validation.passed) << line << ": " << validation.message;
  }
}

}  // namespace
}  // namespace tb::cuda

namespace tb::cuda {
namespace {

// NVML is optional: a missing library is a reason, not an error (this machine has none, a
// GPU machine has the driver's).
TEST(Nvml, AMissingLibraryIsAReasonNotAnError) {
  std::string reason;
  EXPECT_EQ(Nvml::load(&reason, "libtrainbench-no-such-nvml.so.1"), nullptr);
  EXPECT_NE(reason.find("libtrainbench-no-such-nvml.so.1"), std::string::npos) << reason;
  std::string default_reason;
  if (const auto nvml = Nvml::load(&default_reason)) {
    const nlohmann::json description = nvml->describe(0);
    EXPECT_TRUE(description.is_object());
  } else {
    EXPECT_FALSE(default_reason.empty());
    std::printf("NVML absent here: %s\n", default_reason.c_str());
  }
}

// A library that exists but is not NVML: refused with a reason, unloaded.
TEST(Nvml, ALibraryWithoutNvmlIsRefused) {
  std::string reason;
  EXPECT_EQ(Nvml::load(&reason, "libm.so.6"), nullptr);
  EXPECT_NE(reason.find("lacks nvmlInit"), std::string::npos) << reason;
}

}  // namespace
}  // namespace tb::cuda

namespace tb::cuda {
namespace {

// The per-case telemetry summary: absent fields stay absent, throttle bits are named, and the
// energy is the counter's movement over the case.
TEST(NvmlTelemetry, SummaryOfSamples) {
  Nvml::Sample idle{80, 40, 1980, 1000.0, 0x1};
  Nvml::Sample busy{650, 61, 1755, 1400.0, 0x4 | 0x20};
  Nvml::Sample hot{700, 66, 1600, 1650.5, 0x4};
  const nlohmann::json summary = summarize({idle, busy, hot}, 1.0);
  EXPECT_EQ(summary["samples"], 3);
  EXPECT_DOUBLE_EQ(summary["power_w"]["mean"].get<double>(), (80 + 650 + 700) / 3.0);
  EXPECT_DOUBLE_EQ(summary["power_w"]["max"].get<double>(), 700);
  EXPECT_DOUBLE_EQ(summary["temperature_c_max"].get<double>(), 66);
  EXPECT_DOUBLE_EQ(summary["sm_clock_mhz"]["min"].get<double>(), 1600);
  EXPECT_DOUBLE_EQ(summary["energy_j"].get<double>(), 650.5);
  EXPECT_EQ(summary["throttle_reasons"],
            (nlohmann::json{"gpu_idle", "sw_power_cap", "sw_thermal_slowdown"}));
  // A device without the counters: only what was read.
  const nlohmann::json bare = summarize({Nvml::Sample{}, Nvml::Sample{}}, 0.5);
  EXPECT_FALSE(bare.contains("power_w"));
  EXPECT_FALSE(bare.contains("energy_j"));
  EXPECT_NE(bare["energy_unavailable"].get<std::string>().find("no total-energy counter"),
            std::string::npos);
  EXPECT_FALSE(bare.contains("sm_clock_mhz"));
  EXPECT_TRUE(bare["throttle_reasons"].empty());
  // A window shorter than the counter's steps can resolve gives no figure, and says why.
  const nlohmann::json short_window = summarize({idle, hot}, 0.5);
  EXPECT_FALSE(short_window.contains("energy_j"));
  EXPECT_NE(short_window["energy_unavailable"].get<std::string>().find("too short"),
            std::string::npos);
}

}  // namespace
}  // namespace tb::cuda

#include "backends/cuda/datasheet.h"

namespace tb::cuda {
namespace {

// Device names as the runtime reports them pick the right published rates.
TEST(Datasheet, KnownDevicesByTheirRuntimeNames) {
  EXPECT_EQ(datasheet_rates("NVIDIA H200")->model, "H200");
  EXPECT_EQ(datasheet_rates("NVIDIA H100 PCIe")->model, "H100 PCIe");
  EXPECT_EQ(datasheet_rates("NVIDIA H100 80GB HBM3")->model, "H100");
  EXPECT_DOUBLE_EQ(datasheet_rates("NVIDIA H100 80GB HBM3")->bf16, 989.4);
  EXPECT_DOUBLE_EQ(datasheet_rates("NVIDIA A100-SXM4-80GB")->tf32, 156);
  EXPECT_EQ(datasheet_rates("NVIDIA A100-SXM4-80GB")->fp8, 0);  // no fp8 units
  EXPECT_FALSE(datasheet_rates("NVIDIA GeForce RTX 4090").has_value());
}

}  // namespace
}  // namespace tb::cuda

#include "backends/cuda/cuda_plan.h"

namespace tb::cuda {
namespace {

// Faults that break the context stop the GPU cases; out of memory and bad arguments end one
// case only.
TEST(CudaErrors, StickyErrorsAreToldApart) {
  EXPECT_TRUE(is_sticky(cudaErrorIllegalAddress));
  EXPECT_TRUE(is_sticky(cudaErrorLaunchFailure));
  EXPECT_FALSE(is_sticky(cudaErrorMemoryAllocation));
  EXPECT_FALSE(is_sticky(cudaErrorInvalidValue));
  const Status oom = cuda_status(cudaErrorMemoryAllocation, "cudaMalloc");
  EXPECT_EQ(oom.code(), StatusCode::out_of_memory);
  const Status fault = cuda_status(cudaErrorIllegalAddress, "layer norm");
  EXPECT_EQ(fault.code(), StatusCode::failed);
  EXPECT_NE(fault.message().find("sticky"), std::string::npos) << fault.message();
  EXPECT_NE(fault.message().find("layer norm"), std::string::npos);
  EXPECT_TRUE(cuda_status(cudaSuccess, "x").ok());
}

}  // namespace
}  // namespace tb::cuda

#include "backends/cuda/cublaslt_gemm.h"
#include "backends/low_precision.h"

namespace tb::cuda {
namespace {

// FP8 runs where cuBLASLt runs it: Ada / Hopper and later, TN, multiples of 16.
TEST(CudaFp8, WhereCublasLtRunsIt) {
  GemmOp op;
  op.m = op.n = op.k = 4096, op.a_type = op.b_type = DType::f8_e4m3, op.trans_b = true;
  EXPECT_TRUE(fp8_supported(op, 90).ok());
  EXPECT_TRUE(fp8_supported(op, 89).ok());
  EXPECT_EQ(fp8_supported(op, 80).code(), StatusCode::unimplemented);
  GemmOp nn = op;
  nn.trans_b = false;
  EXPECT_NE(fp8_supported(nn, 90).message().find("TN"), std::string::npos);
  GemmOp odd = op;
  odd.k = 4100;
  EXPECT_EQ(fp8_supported(odd, 90).code(), StatusCode::unimplemented);
}

// E4M3 on the host, as the inputs are rounded before upload: exact round trips, round to
// nearest even, subnormals, saturation at 448, NaN.
TEST(CudaFp8, E4m3Conversions) {
  for (int bits = 0; bits < 256; ++bits) {
    if ((bits & 0x7f) == 0x7f) continue;  // NaN
    const float value = cpu::f8_e4m3_to_float(static_cast<std::uint8_t>(bits));
    EXPECT_EQ(cpu::float_to_f8_e4m3(value), bits) << bits;
  }
  EXPECT_EQ(cpu::f8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(cpu::f8_e4m3_to_float(0x01), 0x1p-9f);  // the least subnormal
  EXPECT_EQ(cpu::round_to_f8_e4m3(1.0625f), 1.0f);  // halfway: to the even mantissa
  EXPECT_EQ(cpu::round_to_f8_e4m3(1.1875f), 1.25f);
  EXPECT_EQ(cpu::round_to_f8_e4m3(1000.0f), 448.0f);
  EXPECT_EQ(cpu::round_to_f8_e4m3(-1000.0f), -448.0f);
  EXPECT_TRUE(std::isnan(cpu::f8_e4m3_to_float(cpu::float_to_f8_e4m3(NAN))));
  EXPECT_EQ(cpu::round_to_f8_e4m3(0x1p-7f + 0x1p-11f), 0x1p-7f);  // a quarter step: down
}

}  // namespace
}  // namespace tb::cuda
