#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "backends/status.h"
#include "tests/temp_dir.h"
#include "workloads/keys.h"
#include "workloads/registry.h"

namespace tb {
namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

bool any_names(const std::vector<std::string>& differences, const std::string& kind,
               const std::string& key) {
  for (const std::string& line : differences)
    if (line.starts_with(kind + ":") && line.find("'" + key + "'") != std::string::npos)
      return true;
  return false;
}

// Replaces the first occurrence of `from` after `anchor` in `text`.
std::string damaged(std::string text, const std::string& anchor, const std::string& from,
                    const std::string& to) {
  const auto at = text.find(from, text.find(anchor));
  if (at == std::string::npos) throw std::logic_error("nothing to damage: " + from);
  return text.replace(at, from.size(), to);
}

// The registry holds every kind's entry, in `trainbench list` order, each with a factory that
// makes its kind: the generated list (workloads/CMakeLists.txt) and the kinds' files agree.
TEST(KindRegistry, ListsEveryKindInOrderAndMakesEach) {
  std::vector<std::string> names;
  for (const WorkloadKind& kind : workload_kinds()) names.push_back(kind.name);
  EXPECT_EQ(names, (std::vector<std::string>{"peak", "stream", "transfer", "gemm", "conv",
                                             "resnet50-train", "bert-train", "ttt-fashion-mnist",
                                             "ttt-mlm", "allreduce", "reduce_scatter", "allgather",
                                             "broadcast"}));
  for (const char* descriptor : {"gemm m=8", "broadcast", "peak"})
    EXPECT_EQ(create_workload(Descriptor::parse(descriptor), {})->descriptor().kind(),
              Descriptor::parse(descriptor).kind());
  EXPECT_THROW(create_workload(Descriptor::parse("gemmm m=8"), {}), UsageError);
  // Expansions come from the kind's entry: a collective's sizes=, resnet50-train's batch=sweep.
  EXPECT_EQ(expand_shapes(Descriptor::parse("allreduce sizes=8:32")).size(), 3u);
  EXPECT_EQ(expand_for_backend(Descriptor::parse("resnet50-train batch=sweep"), nullptr, 0).size(),
            1u);
  EXPECT_EQ(expand_for_backend(Descriptor::parse("gemm m=8"), nullptr, 0).size(), 1u);
}

// The key tables of docs/workloads.md are the code's (trainbench list --markdown).
TEST(KeyTables, DocsAgreeWithTheCode) {
  const std::string path = std::string(TRAINBENCH_SOURCE_DIR) + "/docs/workloads.md";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not written yet";
  const auto differences =
      key_table_differences(workload_kinds(), testing_support::file_text(path));
  EXPECT_TRUE(differences.empty()) << path << " (trainbench list --markdown prints the tables):\n"
                                   << joined(differences);
}

TEST(KeyTables, AMatchingDocPassesAndADamagedOneNamesTheKey) {
  const testing_support::TempDir dir("trainbench-keys");
  const std::string path = dir.file("workloads.md");
  {
    std::ofstream out(path);
    out << "# Workloads\n\nSome prose.\n\n" << key_tables_markdown(workload_kinds());
  }
  const std::string doc = testing_support::file_text(path);
  EXPECT_TRUE(key_table_differences(workload_kinds(), doc).empty())
      << joined(key_table_differences(workload_kinds(), doc));

  // A wrong default.
  const std::string wrong_default =
      damaged(doc, "## gemm", "| `dtype` | `f32` |", "| `dtype` | `bf16` |");
  const auto defaults = key_table_differences(workload_kinds(), wrong_default);
  EXPECT_EQ(defaults.size(), 1u) << joined(defaults);
  EXPECT_TRUE(any_names(defaults, "gemm", "dtype")) << joined(defaults);

  // A missing key.
  const auto row = doc.find("| `accum` |", doc.find("## gemm"));
  ASSERT_NE(row, std::string::npos);
  std::string missing = doc;
  missing.erase(row, doc.find('\n', row) - row + 1);
  const auto missed = key_table_differences(workload_kinds(), missing);
  EXPECT_EQ(missed.size(), 1u) << joined(missed);
  EXPECT_TRUE(any_names(missed, "gemm", "accum")) << joined(missed);

  // A key the code does not have, a wrong choice list, and a kind without a table.
  const std::string extra =
      damaged(doc, "## conv", "| `mb` |", "| `colour` | `red` | text | x |\n| `mb` |");
  EXPECT_TRUE(any_names(key_table_differences(workload_kinds(), extra), "conv", "colour"));
  const std::string choices = damaged(doc, "## stream", "`copy`, `scale`", "`copy`");
  EXPECT_TRUE(any_names(key_table_differences(workload_kinds(), choices), "stream", "op"));
  const std::string no_peak = damaged(doc, "## peak", "## peak", "## peek");
  EXPECT_FALSE(key_table_differences(workload_kinds(), no_peak).empty());
}

TEST(KeyTables, EveryKindHasATableAndCreatesAtItsDefaults) {
  const DeviceInfo device;
  for (const WorkloadKind& kind : workload_kinds()) {
    EXPECT_FALSE(kind.keys.empty()) << kind.name;
    Descriptor d(kind.name);
    for (const KeySpec& spec : kind.keys)
      if (spec.required) d.set(spec.name, "8");
    if (kind.name == "conv") d.set("kh", "3");
    EXPECT_NO_THROW(create_workload(d, device)) << d.to_string();
    // Every key the canonical descriptor prints is in the table.
    const Descriptor canonical = create_workload(d, device)->descriptor();
    for (const auto& [key, value] : canonical.params())
      EXPECT_TRUE(kind.find(key)) << kind.name << " prints " << key;
  }
}

TEST(KeyTables, UnknownKeysAndValuesAreRejectedFromTheTable) {
  const DeviceInfo device;
  for (const WorkloadKind& kind : workload_kinds()) {
    Descriptor d(kind.name);
    for (const KeySpec& spec : kind.keys)
      if (spec.required) d.set(spec.name, "8");
    d.set("volume", "11");
    EXPECT_THROW(create_workload(d, device), UsageError) << kind.name;
  }
  try {
    create_workload(Descriptor::parse("gemm m=4 dtype=f77"), device);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("one of f32, bf16, f16, tf32, f8_e4m3, f64"),
              std::string::npos)
        << e.what();
  }
}

TEST(KeyTables, ListUsageComesFromTheTable) {
  const WorkloadKind* gemm = find_workload_kind("gemm");
  ASSERT_TRUE(gemm);
  const std::string usage = key_usage(*gemm);
  for (const char* expected :
       {"m=N", "[dtype=f32|bf16|f16|tf32|f8_e4m3|f64]", "[accum=exact|fast]"})
    EXPECT_NE(usage.find(expected), std::string::npos) << usage;
  EXPECT_NE(key_usage(*find_workload_kind("bert-train")).find("[attention=unfused|fused]"),
            std::string::npos);
  EXPECT_NE(key_usage(*find_workload_kind("conv")).find("[epilogue=none|bias|bias_relu]"),
            std::string::npos);
}

}  // namespace
}  // namespace tb
