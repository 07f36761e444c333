#include <gtest/gtest.h>

#include "backends/status.h"
#include "workloads/descriptor.h"
#include "workloads/registry.h"

namespace tb {
namespace {

TEST(Descriptor, ParsesAndPrintsBack) {
  const Descriptor d = Descriptor::parse("  gemm m=4096   n=1024 dtype=bf16 ta=t ");
  EXPECT_EQ(d.kind(), "gemm");
  EXPECT_EQ(d.get("n"), "1024");
  EXPECT_FALSE(d.get("k"));
  EXPECT_EQ(d.to_string(), "gemm m=4096 n=1024 dtype=bf16 ta=t");
  EXPECT_EQ(Descriptor::parse(d.to_string()), d);
}

TEST(Descriptor, RejectsMalformedLines) {
  for (const char* bad : {"", "   ", "m=4 gemm", "gemm m", "gemm =4", "gemm m=", "gemm m=1 m=2",
                          "gemm m=1;rm", "gemm m=\"4\""})
    EXPECT_THROW(Descriptor::parse(bad), UsageError) << bad;
}

TEST(Descriptor, SetKeepsPositionAndEraseRemoves) {
  Descriptor d = Descriptor::parse("conv mb=16 ic=3");
  d.set("mb", "32").set("oc", "64").erase("ic");
  EXPECT_EQ(d.to_string(), "conv mb=32 oc=64");
}

TEST(Descriptor, IntegersWithSuffixes) {
  EXPECT_EQ(parse_integer("64Ki"), 65536);
  EXPECT_EQ(parse_integer("2Mi"), 2 << 20);
  EXPECT_EQ(parse_integer("1Gi"), std::int64_t{1} << 30);
  EXPECT_EQ(parse_integer("3k"), 3000);
  EXPECT_EQ(parse_integer("-5"), -5);
  EXPECT_FALSE(parse_integer("12x"));
  EXPECT_FALSE(parse_integer("x"));
  EXPECT_FALSE(parse_integer("99999999999Gi"));
}

// Every descriptor a workload prints must create the same workload again.
void expect_round_trip(const std::string& line) {
  const DeviceInfo device;
  const std::string canonical =
      create_workload(Descriptor::parse(line), device)->descriptor().to_string();
  EXPECT_EQ(create_workload(Descriptor::parse(canonical), device)->descriptor().to_string(),
            canonical)
      << line;
}

TEST(Descriptor, WorkloadsRoundTrip) {
  for (const char* line :
       {"gemm m=7", "gemm m=1 n=1000 k=7 dtype=bf16 ta=t tb=t alpha=0.5 beta=-2 layout=prepacked",
        "gemm m=3 batch=4 out=bf16 name=attn", "conv ic=3 ih=224 oc=64 kh=7 sh=2 ph=3",
        "conv mb=2 ic=5 ih=7 iw=9 oc=3 kh=3 kw=1 sh=2 sw=1 ph=1 pw=0 dir=bwd_weights dtype=bf16",
        "conv mb=2 ic=5 ih=7 iw=7 oc=3 kh=3 kw=3 sh=1 sw=1 ph=1 pw=1 dir=fwd dtype=f32 "
        "epilogue=bias_relu",
        "stream op=dot n=1Mi", "stream", "peak dtype=bf16 iterations=1000", "peak"})
    expect_round_trip(line);
}

TEST(Descriptor, ResolvesDefaults) {
  const DeviceInfo device;
  EXPECT_EQ(create_workload(Descriptor::parse("gemm m=7"), device)->descriptor().to_string(),
            "gemm m=7 n=7 k=7 dtype=f32 out=f32 ta=n tb=n alpha=1 beta=0 layout=plain");
}

TEST(Descriptor, StreamDefaultIsFourTimesTheLastLevelCache) {
  DeviceInfo device;
  device.details["last_level_cache_bytes"] = std::uint64_t{512} << 20;
  EXPECT_EQ(create_workload(Descriptor::parse("stream"), device)->descriptor().get("n"),
            std::to_string((std::uint64_t{2048} << 20) / 8));
}

TEST(Descriptor, WorkloadsRejectBadInput) {
  const DeviceInfo device;
  for (const char* bad :
       {"matmul m=4", "gemm", "gemm m=0", "gemm m=-3", "gemm m=4 dtype=f77", "gemm m=4 ta=x",
        "gemm m=4 alpha=x", "gemm m=4 colour=red", "conv ic=3 ih=5 oc=4",
        "conv ic=3 ih=2 oc=4 kh=5", "conv ic=3 ih=8 oc=4 kh=3 ph=3",
        "conv ic=3 ih=8 oc=4 kh=3 dir=sideways", "conv ic=3 ih=8 oc=4 kh=3 epilogue=gelu",
        "conv ic=3 ih=8 oc=4 kh=3 dir=bwd_data epilogue=bias", "stream op=nand", "stream n=0",
        "peak iterations=99999999", "peak dtype=int4", "gemm m=4 shapes=resnet50"})
    EXPECT_THROW(create_workload(Descriptor::parse(bad), device), UsageError) << bad;
}

// Numbers are finite and in range, and sizes whose product would wrap are refused before any
// memory check or allocation computes with them.
TEST(Descriptor, NumbersAreFiniteAndSizesNeverWrap) {
  const DeviceInfo device;
  for (const char* bad : {"gemm m=4 alpha=nan",
                          "gemm m=4 beta=inf",
                          "gemm m=4 alpha=-inf",
                          "gemm m=4 alpha=1e999",
                          "gemm m=4 alpha=1e300",
                          "bert-train model=tiny dropout=1",
                          "bert-train dropout=nan",
                          "bert-train lr=0",
                          "bert-train lr=nan",
                          "resnet50-train lr=-0.1",
                          "resnet50-train lr=inf",
                          "ttt-fashion-mnist target=0",
                          "ttt-fashion-mnist target=1.5",
                          "ttt-mlm warmup=1",
                          "stream n=2305843009213693952",
                          "stream n=9223372036854775807",
                          "gemm m=4294967296 n=4294967296 k=1",
                          "gemm m=2147483648 batch=2147483648 n=1 k=1",
                          "conv mb=4611686018427387904 ic=3 ih=8 oc=4 kh=3",
                          "conv ic=3 ih=8 oc=4 kh=4611686018427387904 ph=4611686018427387903",
                          "transfer bytes=4611686018427387904",
                          "resnet50-train batch=99999999",
                          "resnet50-train image=1000000",
                          "bert-train seq=9999999",
                          "ttt-mlm seq=513",
                          "gemm m=99999999999999999999"})
    EXPECT_THROW(create_workload(Descriptor::parse(bad), device), UsageError) << bad;
  for (const char* good : {"gemm m=4 alpha=-2.5e3 beta=1e-3", "bert-train dropout=0 lr=1e-5",
                           "stream n=1Mi", "ttt-fashion-mnist target=1"})
    EXPECT_NO_THROW(create_workload(Descriptor::parse(good), device)) << good;
}

TEST(Shapes, ExpandMergesKeysAndUserKeysWin) {
  const auto cases =
      expand_shapes(Descriptor::parse("conv shapes=resnet50 mb=32 dir=bwd_data dtype=bf16"));
  ASSERT_EQ(cases.size(), 24u);
  EXPECT_EQ(cases[0].get("name"), "conv1");
  EXPECT_EQ(cases[0].get("mb"), "32");
  EXPECT_EQ(cases[0].get("dir"), "bwd_data");
  EXPECT_FALSE(cases[0].has("shapes"));
  const DeviceInfo device;
  for (const Descriptor& d : cases) EXPECT_NO_THROW(create_workload(d, device)) << d.to_string();
}

TEST(Shapes, UnknownListOrWrongKindIsAUsageError) {
  EXPECT_THROW(expand_shapes(Descriptor::parse("conv shapes=nosuch")), UsageError);
  EXPECT_THROW(expand_shapes(Descriptor::parse("gemm shapes=resnet50")), UsageError);
}

TEST(Suites, EveryCaseOfEverySuiteCreates) {
  const DeviceInfo device;
  ASSERT_FALSE(suite_names().empty());
  for (const std::string& suite : suite_names()) {
    const auto cases = load_suite(suite);
    EXPECT_FALSE(cases.empty()) << suite;
    for (const Descriptor& requested : cases)  // expanded per backend as the runner does
      for (const Descriptor& d :
           expand_for_backend(requested, nullptr, memory_for_expansion(device)))
        EXPECT_NO_THROW(create_workload(d, device)) << suite << ": " << d.to_string();
  }
  EXPECT_THROW(load_suite("nosuch"), UsageError);
}

}  // namespace
}  // namespace tb
