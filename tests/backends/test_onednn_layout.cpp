// cpu-onednn's activation layout comes from oneDNN, and reference kernels are recognised.
#include <gtest/gtest.h>

#include <fmt/format.h>

#ifdef TRAINBENCH_HAVE_ONEDNN
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

TEST(OneDnnKernels, FallbacksEndWithNhwcThenPlain) {
  EXPECT_EQ(fallback_layouts(tag::nChw8c), (std::vector<tag>{tag::nChw8c, tag::nhwc, tag::nchw}));
  EXPECT_EQ(fallback_layouts(tag::nhwc), (std::vector<tag>{tag::nhwc, tag::nchw}));
}

}  // namespace
}  // namespace tb::onednn
#endif
