// cpu-onednn's activation layout comes from oneDNN, reference kernels are recognised, and its
// ISA and bf16 details are named in the architecture's own terms.
#include <gtest/gtest.h>

#include <fmt/format.h>

#ifdef TRAINBENCH_HAVE_ONEDNN
#include <cstring>

#include "backends/onednn/onednn_api.h"
#include "backends/onednn/onednn_backend.h"
#include "backends/onednn/onednn_layout.h"
#include "backends/onednn/onednn_plan.h"
#include "backends/operands.h"

namespace tb::onednn {
namespace {

// A primitive's arguments are bound to the op's operands by name, in the op's order; an
// operand left unbound or a binding of a name the op does not declare is refused.
TEST(OneDnnBindings, FollowTheDeclarationByName) {
  const BinaryOp add{.count = 8};
  const memory::desc data({8}, memory::data_type::f32, tag::x);
  const std::vector<OneDnnPlan::Operand> bound =
      bind_operands(binary_operands(add), {{"dst", DNNL_ARG_DST, data, data},
                                           {"src1", DNNL_ARG_SRC_1, data, data},
                                           {"src0", DNNL_ARG_SRC_0, data, data}});
  ASSERT_EQ(bound.size(), 3u);
  EXPECT_EQ(bound[0].spec.name, "src0");
  EXPECT_EQ(bound[0].arg, DNNL_ARG_SRC_0);
  EXPECT_EQ(bound[2].arg, DNNL_ARG_DST);
  EXPECT_THROW(bind_operands(binary_operands(add), {{"src0", DNNL_ARG_SRC_0, data, data},
                                                    {"dst", DNNL_ARG_DST, data, data}}),
               std::logic_error);
  EXPECT_THROW(bind_operands(binary_operands(add), {{"src0", DNNL_ARG_SRC_0, data, data},
                                                    {"src1", DNNL_ARG_SRC_1, data, data},
                                                    {"dst", DNNL_ARG_DST, data, data},
                                                    {"bias", DNNL_ARG_BIAS, data, data}}),
               std::logic_error);
}

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
  EXPECT_TRUE(bf16.starts_with("unavailable: oneDNN ") &&
              bf16.find("has no bf16 kernels on AArch64") != std::string::npos)
      << bf16;
  for (const std::string& text : {isa, bf16})
    for (const char* x86 : {"avx", "sse", "amx", "x64"})
      EXPECT_EQ(text.find(x86), std::string::npos) << text;
#else
  EXPECT_TRUE(isa.starts_with("avx") || isa.starts_with("sse")) << isa;
  EXPECT_TRUE(bf16.starts_with("native") || bf16.starts_with("emulated") ||
              bf16.starts_with("converted") ||
              (bf16.starts_with("unavailable: oneDNN ") &&
               bf16.find("runs bf16 from avx512_core") != std::string::npos))
      << bf16;
  // f16 names what would run it; on 2.x nothing does.
  const std::string f16 = details.value("onednn_f16", "");
  EXPECT_TRUE(f16.starts_with("native (avx512_core") ||
              (f16.starts_with("unavailable: oneDNN ") &&
               f16.find("AVX512-FP16 or AMX-FP16") != std::string::npos))
      << f16;
#endif
  // Each says which oneDNN it speaks for.
  EXPECT_NE(bf16.find("oneDNN " + std::to_string(DNNL_VERSION_MAJOR) + "."), std::string::npos)
      << bf16;
}

// A CPU by hand: `vendor`, and leaf 0x8000001D's first subleaf (zeros: it describes no cache).
cpu::CpuidReader cpu_with(const char* vendor, cpu::CpuidRegisters l1) {
  return [vendor, l1](std::uint32_t leaf, std::uint32_t) {
    cpu::CpuidRegisters r;
    if (leaf == 0) {
      std::memcpy(&r.ebx, vendor, 4);
      std::memcpy(&r.edx, vendor + 4, 4);
      std::memcpy(&r.ecx, vendor + 8, 4);
    }
    if (leaf == 0x8000001Du) r = l1;
    return r;
  };
}

// oneDNN 3.x before 3.8 divides by zero where it reads an AMD CPU's L1 as a byte: named for
// that CPU and those versions only.
TEST(OneDnnKernels, TheKnownCacheFaultIsNamedWhereItApplies) {
  // 32 KiB, 8 ways, 64-byte lines, 64 sets, shared by 2 logical CPUs (a Zen core's L1d).
  const cpu::CpuidRegisters zen_l1{(1u << 14) | 0x21, (7u << 22) | 63u, 63, 0};
  const cpu::CpuidReader no_leaf = cpu_with("AuthenticAMD", {});
  const std::string fault = api::known_fault(3, 7, no_leaf);
  EXPECT_NE(fault.find("oneDNN 3.7 takes this CPU's L1 data cache as 1 byte(s)"), std::string::npos)
      << fault;
  EXPECT_NE(fault.find("ONEDNN_MAX_CPU_ISA=AVX"), std::string::npos) << fault;
  EXPECT_FALSE(api::known_fault(3, 0, no_leaf).empty());
  EXPECT_EQ(api::known_fault(3, 7, cpu_with("HygonGenuine", {})), "");      // not xbyak's AMD path
  EXPECT_EQ(api::known_fault(3, 7, cpu_with("AuthenticAMD", zen_l1)), "");  // 16 KiB a CPU
  EXPECT_EQ(api::known_fault(3, 7, cpu_with("GenuineIntel", {})), "");      // leaf 4 there
  EXPECT_EQ(api::known_fault(2, 6, no_leaf), "");  // 2.6's xbyak left AMD's caches to guesses
  EXPECT_EQ(api::known_fault(3, 8, no_leaf), "");  // 3.8 reads the leaf checked
}

TEST(OneDnnKernels, FallbacksEndWithNhwcThenPlain) {
  EXPECT_EQ(fallback_layouts(tag::nChw8c), (std::vector<tag>{tag::nChw8c, tag::nhwc, tag::nchw}));
  EXPECT_EQ(fallback_layouts(tag::nhwc), (std::vector<tag>{tag::nhwc, tag::nchw}));
}

}  // namespace
}  // namespace tb::onednn
#endif
