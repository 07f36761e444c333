// Every implemented op of every usable backend against the reference, on awkward shapes.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>
#include <variant>

#include "backends/numeric.h"
#include "backends/operands.h"
#include "backends/registry.h"
#include "backends/seeded.h"
#include "workloads/registry.h"
#include "workloads/workload.h"

namespace tb {
namespace {

// Every backend in this build: one that cannot run here skips its tests, saying why.
std::vector<std::string> built_backends() {
  std::vector<std::string> names;
  for (const BackendEntry& entry : backend_registry()) names.push_back(entry.name);
  return names;
}

class BackendOps : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const BackendEntry* entry = find_backend(GetParam());
    ASSERT_NE(entry, nullptr);
    const Availability availability = entry->probe();
    if (!availability.usable)
      GTEST_SKIP() << GetParam() << " is not usable here: " << availability.reason;
    ASSERT_TRUE(entry->create(BackendConfig{}, &backend_).ok());
  }

  // The dtypes this backend must run here: fp32 and fp64 everywhere; bf16 on cpu-onednn
  // where oneDNN has bf16 kernels for the CPU (avx512_core and up) and on a GPU.
  bool must_run(DType dtype) const {
    if (dtype == DType::f32 || dtype == DType::f64) return true;
    if (dtype != DType::bf16) return GetParam() == "cuda";
    if (GetParam() == "cpu-onednn")
      return !backend_->device_info()
                  .details.value("onednn_bf16", std::string("unavailable"))
                  .starts_with("unavailable");
    return GetParam() == "cuda";
  }

  // Sets up the case, validates it against the reference, and runs it a few more times.
  // fp32 must run on every CPU backend; a backend may lack a low-precision path, and then
  // must say why.
  void expect_valid(const std::string& line, bool may_be_unimplemented = false) {
    SCOPED_TRACE(line);
    std::unique_ptr<Workload> workload =
        create_workload(Descriptor::parse(line), backend_->device_info());
    const Status setup = workload->setup(*backend_, 1234);
    if (setup.code() == StatusCode::unimplemented &&
        (may_be_unimplemented || !must_run(workload->dtype()))) {
      EXPECT_FALSE(setup.message().empty());
      ++unimplemented_;
      return;
    }
    ASSERT_TRUE(setup.ok()) << setup.message();
    const Validation validation = workload->validate();
    EXPECT_TRUE(validation.passed) << validation.message;
    EXPECT_GT(validation.checked, 0);
    EXPECT_LE(validation.error, validation.tolerance);
    EXPECT_FALSE(workload->implementation().empty());
    for (int i = 0; i < 2; ++i) {
      if (workload->output_feeds_back()) {
        ASSERT_TRUE(workload->reset().ok());
      }
      ASSERT_TRUE(workload->run().ok());
    }
    // Still right after repeated runs (beta != 0 must not accumulate across them).
    EXPECT_TRUE(workload->validate().passed);
  }

  std::unique_ptr<Backend> backend_;
  int unimplemented_ = 0;
};

// OpenBLAS takes 32-bit sizes (blasint): a larger one is unimplemented, named, never truncated.
// Planning allocates nothing, so the 2^31-row GEMM costs no memory here.
// Every op kind of the variant names itself, each name once; the linear products are GEMM,
// convolution and fully connected, and they and fused attention count their work.
TEST(OpSet, EveryOpNamesItselfAndProductsCountTheirWork) {
  std::set<std::string_view> names;
  std::map<std::string_view, double> flops;
  std::map<std::string_view, bool> linear;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (([&] {
       const OpDesc op{std::in_place_index<I>};
       names.insert(op_name(op));
       flops[op_name(op)] = product_flops(op);
       linear[op_name(op)] = is_linear_product(op);
     }()),
     ...);
  }
  (std::make_index_sequence<std::variant_size_v<OpDesc>>{});
  EXPECT_EQ(names.size(), std::variant_size_v<OpDesc>);
  EXPECT_FALSE(names.contains(""));
  for (const auto& [name, is_linear] : linear)
    EXPECT_EQ(is_linear, name == "gemm" || name == "conv" || name == "fully_connected") << name;
  // Default descriptors are 1-element problems: one multiply-add, two FLOPs (gemm: 0 x 0).
  EXPECT_EQ(flops["conv"], 2);
  EXPECT_EQ(flops["fully_connected"], 2);
  EXPECT_EQ(flops["attention"], 4);
  EXPECT_EQ(flops["batch_norm"], 0);
  const GemmOp gemm{.m = 3, .n = 5, .k = 7, .batch = 2, .heads = 4};
  EXPECT_EQ(multiply_adds(gemm), 2 * 4 * 3 * 5 * 7);
  EXPECT_EQ(product_flops(gemm), 2.0 * multiply_adds(gemm));
  AttentionOp attention{.batch = 2, .heads = 3, .sequence = 8, .head_dim = 16};
  EXPECT_EQ(product_flops(attention), 2 * 2.0 * 2 * 3 * 8 * 8 * 16);
  attention.pass = Pass::backward;
  EXPECT_EQ(product_flops(attention), 4 * 2.0 * 2 * 3 * 8 * 8 * 16);
  EXPECT_EQ(multiply_adds(attention), 0);
}

TEST(OpenBlasSizes, AboveItsIntegerAreUnimplementedNotTruncated) {
  const BackendEntry* entry = find_backend("cpu-openblas");
  if (!entry || !entry->probe().usable) GTEST_SKIP() << "cpu-openblas is not usable here";
  std::unique_ptr<Backend> backend;
  ASSERT_TRUE(entry->create(BackendConfig{}, &backend).ok());
  std::unique_ptr<Plan> plan;
  const std::int64_t past = std::int64_t{1} << 31;
  for (const OpDesc& op :
       {OpDesc{GemmOp{.m = past, .n = 1, .k = 1}}, OpDesc{GemmOp{.m = 1, .n = 1, .k = past}},
        OpDesc{FullyConnectedOp{.mb = past}}}) {
    const Status status = backend->plan(op, &plan);
    EXPECT_EQ(status.code(), StatusCode::unimplemented) << status.message();
    EXPECT_NE(status.message().find("blasint"), std::string::npos) << status.message();
  }
  EXPECT_TRUE(backend->plan(GemmOp{.m = 8, .n = 8, .k = 8}, &plan).ok());
}

TEST_P(BackendOps, GemmAwkwardShapes) {
  for (const char* shape :
       {"m=1 n=1 k=1", "m=7 n=1 k=1000", "m=1000 n=7 k=1", "m=13 n=1000 k=7", "m=64 n=48 k=96"})
    for (const char* transposes : {"ta=n tb=n", "ta=t tb=n", "ta=n tb=t", "ta=t tb=t"})
      for (const char* dtype : {"f32", "bf16"})
        expect_valid(fmt::format("gemm {} {} dtype={}", shape, transposes, dtype));
}

TEST_P(BackendOps, GemmAlphaBetaBatchLayouts) {
  expect_valid("gemm m=33 n=17 k=65 alpha=0.5 beta=0.75");
  expect_valid("gemm m=33 n=17 k=65 alpha=-2 beta=1 ta=t");
  expect_valid("gemm m=33 n=17 k=65 dtype=bf16 out=bf16");
  expect_valid("gemm m=16 n=24 k=8 batch=3 ta=n tb=t");
  // Pre-packing is a CPU library's layout (cuBLASLt has none): a backend may lack it.
  expect_valid("gemm m=128 n=96 k=200 layout=prepacked", /*may_be_unimplemented=*/true);
  expect_valid("gemm m=128 n=96 k=200 dtype=bf16 layout=prepacked tb=t",
               /*may_be_unimplemented=*/backend_->device_info().kind == "gpu");
}

TEST_P(BackendOps, ConvAwkwardShapes) {
  for (const char* shape :
       {"mb=1 ic=1 ih=1 oc=1 kh=1", "mb=2 ic=3 ih=7 oc=5 kh=3 ph=1",
        "mb=3 ic=7 ih=9 iw=6 oc=4 kh=3 kw=2 sh=2 sw=1 ph=1 pw=0",
        "mb=2 ic=16 ih=13 oc=32 kh=1 sh=2", "mb=1 ic=3 ih=23 oc=8 kh=7 sh=2 ph=3",
        "mb=2 ic=32 ih=14 oc=16 kh=3 sh=2 ph=1"})
    for (const char* dir : {"fwd", "bwd_data", "bwd_weights"})
      for (const char* dtype : {"f32", "bf16"})
        expect_valid(fmt::format("conv {} dir={} dtype={}", shape, dir, dtype));
}

// A forward convolution with its bias (and ReLU) applied in the same pass.
TEST_P(BackendOps, ConvEpilogues) {
  for (const char* shape : {"mb=2 ic=3 ih=7 oc=5 kh=3 ph=1", "mb=2 ic=16 ih=13 oc=32 kh=1 sh=2"})
    for (const char* epilogue : {"bias", "bias_relu"})
      for (const char* dtype : {"f32", "bf16"})
        expect_valid(fmt::format("conv {} epilogue={} dtype={}", shape, epilogue, dtype));
}

// gather_operand gives what export_operand gives at the same positions, in every layout a plan
// holds its operands in: oneDNN's blocked nChw16c and OIhw16i16o (a channel count that pads
// its blocks), a prepacked B, attention's head-interleaved strided operands; inputs and outputs,
// f32 and bf16.
TEST_P(BackendOps, GatheredElementsAreTheExportedOnes) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    if (!must_run(dtype)) continue;
    std::vector<OpDesc> ops;
    for (const ConvDirection direction :
         {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_weights})
      ops.push_back(ConvOp{.direction = direction,
                           .mb = 3,
                           .ic = 20,
                           .ih = 9,
                           .iw = 7,
                           .oc = 36,
                           .kh = 3,
                           .kw = 3,
                           .ph = 1,
                           .pw = 1,
                           .dtype = dtype,
                           .layout = Layout::native});
    ops.push_back(GemmOp{.m = 33,
                         .n = 70,
                         .k = 48,
                         .a_type = dtype,
                         .b_type = dtype,
                         .c_type = dtype,
                         .prepacked_b = true});
    ops.push_back(GemmOp{.m = 9,
                         .n = 11,
                         .k = 8,
                         .trans_b = true,
                         .a_type = dtype,
                         .b_type = dtype,
                         .c_type = dtype,
                         .batch = 2,
                         .heads = 3,
                         .a_interleaved = true,
                         .b_interleaved = true,
                         .c_interleaved = true});
    for (const OpDesc& op : ops) {
      std::unique_ptr<Plan> plan;
      const Status planned = backend_->plan(op, &plan);
      if (planned.code() == StatusCode::unimplemented) continue;
      ASSERT_TRUE(planned.ok()) << planned.message();
      for (std::size_t i = 0; i < plan->operands().size(); ++i) {
        const OperandSpec& spec = plan->operands()[i];
        const int index = static_cast<int>(i);
        Buffer buffer;
        ASSERT_TRUE(backend_->allocate(spec.bytes, &buffer).ok());
        ASSERT_TRUE(import_floats(*backend_, *plan, index,
                                  random_values(spec.elements(), 11 + i, spec.dtype), buffer)
                        .ok());
        std::vector<char> exported(spec.elements() * dtype_size(spec.dtype));
        ASSERT_TRUE(backend_->export_operand(*plan, index, buffer, exported.data()).ok());
        std::vector<std::int64_t> positions;
        for (std::int64_t p = 0; p < 500; ++p)
          positions.push_back(static_cast<std::int64_t>(
              mix64(static_cast<std::uint64_t>(p) + 97 * i) % spec.elements()));
        positions.push_back(static_cast<std::int64_t>(spec.elements()) - 1);
        const std::size_t size = dtype_size(spec.dtype);
        std::vector<char> gathered(positions.size() * size);
        ASSERT_TRUE(
            backend_->gather_operand(*plan, index, buffer, positions, gathered.data()).ok());
        for (std::size_t p = 0; p < positions.size(); ++p)
          ASSERT_EQ(
              std::memcmp(gathered.data() + p * size,
                          exported.data() + static_cast<std::size_t>(positions[p]) * size, size),
              0)
              << op_name(op) << " " << spec.name << " position " << positions[p];
        backend_->release(buffer);
      }
    }
  }
}

TEST_P(BackendOps, StreamKernels) {
  for (const char* op : {"copy", "scale", "add", "triad", "dot"})
    for (const char* n : {"1", "7", "1000", "1Mi"})
      expect_valid(fmt::format("stream op={} n={}", op, n));
}

TEST_P(BackendOps, PeakProbes) {
  expect_valid("peak dtype=f32 iterations=1000");
  const auto workload = create_workload(Descriptor::parse("peak dtype=bf16 iterations=1000"),
                                        backend_->device_info());
  const Status status = workload->setup(*backend_, 0);
  if (status.code() == StatusCode::unimplemented) GTEST_SKIP() << status.message();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(workload->validate().passed);
}

TEST_P(BackendOps, UnsupportedDtypeIsUnimplementedNotACrash) {
  auto workload =
      create_workload(Descriptor::parse("gemm m=8 dtype=f8_e4m3"), backend_->device_info());
  const Status status = workload->setup(*backend_, 0);
  EXPECT_EQ(status.code(), StatusCode::unimplemented) << status.message();
}

// No backend casts to FP8 (the FP8 GEMM takes its inputs already in FP8).
TEST_P(BackendOps, OpsABackendLacksAnswerUnimplemented) {
  std::unique_ptr<Plan> plan;
  const Status status =
      backend_->plan(CastOp{.count = 8, .from = DType::f32, .to = DType::f8_e4m3}, &plan);
  EXPECT_EQ(status.code(), StatusCode::unimplemented);
  EXPECT_FALSE(status.message().empty());
}

TEST_P(BackendOps, ExecuteChecksOperands) {
  std::unique_ptr<Plan> plan;
  GemmOp op;
  op.m = op.n = op.k = 4;
  ASSERT_TRUE(backend_->plan(op, &plan).ok());
  std::vector<Buffer> too_few(1);
  EXPECT_EQ(backend_->execute(*plan, too_few, Buffer{}).code(), StatusCode::invalid_argument);
}

TEST_P(BackendOps, AllocationBeyondMemoryIsAnError) {
  Buffer buffer;
  const Status status = backend_->allocate(std::size_t{1} << 50, &buffer);
  EXPECT_EQ(status.code(), StatusCode::out_of_memory);
  EXPECT_NE(status.message().find("GiB"), std::string::npos) << status.message();
}

INSTANTIATE_TEST_SUITE_P(Usable, BackendOps, testing::ValuesIn(built_backends()),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendOps);

}  // namespace
}  // namespace tb

namespace tb {
namespace {

// Each kind of status has its code; a site that knows more names a finer one.
TEST(StatusReason, DefaultsByKindAndNarrowsAtTheSite) {
  EXPECT_EQ(Status::Ok().reason_code(), ReasonCode::none);
  EXPECT_EQ(Status::OutOfMemory("x").reason_code(), ReasonCode::not_enough_memory);
  EXPECT_EQ(Status::Unavailable("x").reason_code(), ReasonCode::backend_unusable);
  EXPECT_EQ(Status::Failed("x").reason_code(), ReasonCode::error);  // not a library's, unless
  EXPECT_EQ(Status::LibraryFailed("x").reason_code(), ReasonCode::library_error);
  EXPECT_EQ(Status::Unimplemented("x").reason_code(), ReasonCode::unimplemented);
  const Status narrowed =
      Status::Unimplemented("bf16 needs AVX512_CORE").because(ReasonCode::isa_lacking);
  EXPECT_EQ(narrowed.code(), StatusCode::unimplemented);
  EXPECT_EQ(narrowed.reason_code(), ReasonCode::isa_lacking);
  EXPECT_EQ(narrowed.message(), "bf16 needs AVX512_CORE");
  const Status placed = narrowed.with_prefix("conv1 (conv): ");  // a step's op keeps its code
  EXPECT_EQ(placed.reason_code(), ReasonCode::isa_lacking);
  EXPECT_EQ(placed.message(), "conv1 (conv): bf16 needs AVX512_CORE");
}

// Roles are declared with the operands: what the op check reads instead of their names.
TEST(OperandRoles, AreDeclaredWithTheOperands) {
  auto roles = [](const std::vector<OperandSpec>& specs) {
    std::map<std::string, OperandRole> by_name;
    for (const OperandSpec& spec : specs) by_name[spec.name] = spec.role;
    return by_name;
  };
  BatchNormOp bn{.mb = 2, .channels = 3, .h = 4, .w = 4, .fuse_relu = true};
  auto forward = roles(batch_norm_operands(bn));
  EXPECT_EQ(forward["running_mean"], OperandRole::running_statistic);
  EXPECT_EQ(forward["running_var"], OperandRole::running_statistic);
  EXPECT_EQ(forward["relu_mask"], OperandRole::workspace);
  EXPECT_EQ(forward["mean"], OperandRole::value);
  bn.pass = Pass::backward;
  EXPECT_EQ(roles(batch_norm_operands(bn))["relu_mask"], OperandRole::workspace);

  const auto adamw = roles(optimizer_operands({.kind = OptimizerKind::adamw, .count = 8}));
  for (const char* name : {"weights", "m", "v"})
    EXPECT_EQ(adamw.at(name), OperandRole::updated_in_place) << name;
  EXPECT_EQ(adamw.at("grads"), OperandRole::value);
  EXPECT_EQ(roles(optimizer_operands({.count = 8})).at("momentum"), OperandRole::updated_in_place);
  EXPECT_EQ(roles(unscale_gradients_operands({.count = 8})).at("grads"),
            OperandRole::updated_in_place);

  EmbeddingOp embedding{.pass = Pass::backward, .tokens = 4, .vocab = 10, .dim = 2};
  EXPECT_EQ(roles(embedding_operands(embedding)).at("diff_table"), OperandRole::value);
  embedding.accumulate = true;
  EXPECT_EQ(roles(embedding_operands(embedding)).at("diff_table"), OperandRole::accumulated);
  EXPECT_EQ(roles(pool_operands({.kind = PoolKind::max,
                                 .mb = 1,
                                 .channels = 1,
                                 .ih = 2,
                                 .iw = 2,
                                 .kh = 2,
                                 .kw = 2,
                                 .sh = 2,
                                 .sw = 2}))
                .at("indices"),
            OperandRole::workspace);

  // Only the in-place, accumulated and running operands read their previous contents.
  for (const OperandSpec& spec : batch_norm_operands(BatchNormOp{}))
    EXPECT_EQ(spec.reads_previous(), spec.name == "running_mean" || spec.name == "running_var")
        << spec.name;
}

// Operands are bound by the names their op declares, whatever their position, and a name the
// op does not declare, or a write to an input, is refused loudly.
TEST(BoundOperands, BindByNameAndRefuseWhatTheOpDoesNotDeclare) {
  BatchNormOp bn{.mb = 2, .channels = 3, .h = 4, .w = 4, .fuse_relu = true};
  bn.pass = Pass::backward;
  const std::vector<OperandSpec> specs = batch_norm_operands(bn);
  std::vector<float> storage(specs.size());
  std::vector<Buffer> buffers;
  for (float& slot : storage) buffers.push_back({&slot, sizeof(float)});
  const BoundOperands b(specs, buffers);
  for (std::size_t i = 0; i < specs.size(); ++i)
    EXPECT_EQ(b.buffer(specs[i].name).data, &storage[i]) << specs[i].name;
  EXPECT_EQ(b.out<float>("diff_src"), &storage[operand_index(specs, "diff_src")]);
  EXPECT_NE(b.in_if<std::int32_t>("relu_mask"), nullptr);
  EXPECT_THROW(b.out<float>("src"), std::logic_error);  // an input
  EXPECT_THROW(b.in<float>("dst"), std::logic_error);   // the forward's, not the backward's
  EXPECT_EQ(b.out_if<float>("running_mean"), nullptr);
  bn.fuse_relu = false;
  const std::vector<OperandSpec> no_mask = batch_norm_operands(bn);
  EXPECT_FALSE(find_operand(no_mask, "relu_mask").has_value());
  EXPECT_EQ(BoundOperands(no_mask, buffers).in_if<std::int32_t>("relu_mask"), nullptr);
  EXPECT_THROW(BoundOperands(specs, std::span(buffers).first(2)), std::logic_error);
  try {
    operand_index(no_mask, "relu_mask");
    ADD_FAILURE() << "no throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("no operand 'relu_mask' among the op's (src, diff_dst"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tb
