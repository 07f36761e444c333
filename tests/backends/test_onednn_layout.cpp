// cpu-onednn's activation layout comes from oneDNN, reference kernels are recognised, and its
// ISA and bf16 details are named in the architecture's own terms.
#include <gtest/gtest.h>

#include <fmt/format.h>

#ifdef TRAINBENCH_HAVE_ONEDNN
#include "backends/onednn/onednn_backend.h"
#include "backends/onednn/onednn_layout.h"

namespace tb::onednn {
namespace {

TEST(OneDnnKernels, ReferenceImplementationsAreRecognisedByName) {
  for (const char* name : {"ref:any", "bnorm_ref:any", "gemm:ref", "ref_fused_convolution:any",
                           "simple:any", "ref_lrn:any"})
    EXPECT_TRUE(is_reference_implementation(name)) << name;
  for (const char* name :
       {"jit:avx2", "jit_1x1:avx512_core", "bnorm_jit:avx2", "x64:gemm:jit", "brg:avx512_core_amx",
        "jit:uni", "jit_bf16:avx512_core_bf16", "dnnl_sgemm", "gemm:jit"})
    EXPECT_FALSE(is_reference_implementation(name)) << name;
}

TEST(OneDnnKernels, TheHostGetsALayoutInWhichEveryProbedOpIsOptimized) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const ActivationLayout layout = choose_activation_layout(engine, dnnl::memory::data_type::f32);
  ASSERT_TRUE(layout.usable) << layout.reason;
  EXPECT_FALSE(layout.reason.empty());
  // Convolutions in three directions, the stem, batch norm, pooling, ReLU and add.
  EXPECT_GE(layout.probes.size(), 18u);
#if !defined(__x86_64__)
  // oneDNN 2.6 has JIT kernels on aarch64 for some SVE widths and ops only (Debian's build has
  // no Compute Library): the reference ones are flagged in every report, and this is said.
  std::string reference;
  for (const LayoutProbe& probe : layout.probes)
    if (!probe.optimized) reference += fmt::format(" {}: {};", probe.op, probe.implementation);
  if (!reference.empty()) GTEST_SKIP() << "oneDNN runs reference kernels here:" << reference;
#endif
  for (const LayoutProbe& probe : layout.probes)
    EXPECT_TRUE(probe.optimized) << probe.op << ": " << probe.implementation;
  // A blocked layout takes whole blocks only: the 3-channel image stays plain.
  EXPECT_EQ(layout.for_channels(3), layout.block ? tag::nchw : layout.blocked);
  EXPECT_EQ(layout.for_channels(64), layout.blocked);
}

TEST(OneDnnKernels, DeviceDetailsNameThisArchitecturesIsa) {
  std::unique_ptr<Backend> backend;
  ASSERT_TRUE(onednn_backend_entry().create(BackendConfig{}, &backend).ok());
  const nlohmann::json details = backend->device_info().details;
  const std::string isa = details.value("onednn_max_cpu_isa", "");
  const std::string bf16 = details.value("onednn_bf16", "");
  EXPECT_EQ(isa.find("isa code"), std::string::npos) << isa;  // a name, not a number
#if defined(__aarch64__)
  // oneDNN's own AArch64 levels, and no x86 ISA anywhere in what it says.
  EXPECT_TRUE(isa == "asimd" || isa == "sve_512" || isa.starts_with("aarch64")) << isa;
  EXPECT_TRUE(bf16.starts_with("unavailable: oneDNN 2.6 has no bf16 kernels on AArch64")) << bf16;
  for (const std::string& text : {isa, bf16})
    for (const char* x86 : {"avx", "sse", "amx", "x64"})
      EXPECT_EQ(text.find(x86), std::string::npos) << text;
#else
  EXPECT_TRUE(isa.starts_with("avx") || isa.starts_with("sse")) << isa;
  EXPECT_TRUE(bf16.starts_with("native") || bf16.starts_with("emulated") ||
              bf16.starts_with("unavailable: oneDNN 2.6 runs bf16 from avx512_core"))
      << bf16;
#endif
}

TEST(OneDnnKernels, FallbacksEndWithNhwcThenPlain) {
  EXPECT_EQ(fallback_layouts(tag::nChw8c), (std::vector<tag>{tag::nChw8c, tag::nhwc, tag::nchw}));
  EXPECT_EQ(fallback_layouts(tag::nhwc), (std::vector<tag>{tag::nhwc, tag::nchw}));
}

}  // namespace
}  // namespace tb::onednn
#endif
