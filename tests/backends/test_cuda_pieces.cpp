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
  for (const char* line :
       {"stream op=copy n=1001", "stream op=scale n=4Mi", "stream op=add n=7",
        "stream op=triad n=1Mi", "stream op=dot n=1000001", "transfer dir=h2d bytes=8Mi",
        "transfer dir=d2h bytes=8 memory=pageable", "transfer dir=d2d bytes=1Mi",
        "peak dtype=f32 iterations=1000", "gemm m=7 n=1000 k=13", "gemm m=256 dtype=tf32 ta=t",
        "gemm m=129 n=65 k=300 dtype=bf16 tb=t", "gemm m=64 dtype=f16 out=f16",
        "gemm m=32 n=48 k=16 batch=3 alpha=0.5 beta=0.25", "conv mb=2 ic=16 ih=14 oc=32 kh=3 ph=1",
        "conv mb=2 ic=16 ih=14 oc=32 kh=3 ph=1 dir=bwd_data dtype=bf16",
        "conv mb=2 ic=16 ih=15 oc=8 kh=3 sh=2 dir=bwd_weights dtype=tf32",
        "conv mb=2 ic=3 ih=32 oc=8 kh=7 sh=2 ph=3 dir=bwd_weights dtype=f16"}) {
    auto workload = create_workload(Descriptor::parse(line), backend->device_info());
    ASSERT_TRUE(workload->setup(*backend, 5).ok()) << line;
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
