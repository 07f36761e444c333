// The buyer's table of several machines' reports: families paired across sizes, every row and
// every reason a figure is missing, energy and cost per unit of work, reports grouped by host,
// and the suites that make the pairs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "backends/status.h"
#include "reports/buyers_table.h"
#include "reports/case_family.h"
#include "reports/report.h"
#include "workloads/registry.h"

namespace tb {
namespace {

// A passed result of baseline.json's first (GEMM) result's form, with another case and figure.
nlohmann::json result_like(const nlohmann::json& report, const std::string& workload,
                           const std::string& backend, const std::string& dtype,
                           const std::string& metric, double value) {
  nlohmann::json result = report["results"][0];
  result.erase("headline");
  result["workload"] = workload;
  result["backend"] = backend;
  result["dtype"] = dtype;
  result["metrics"] = {{metric, value}};
  return result;
}

nlohmann::json unpassed(nlohmann::json result, const std::string& status,
                        const std::string& reason) {
  result["status"] = status;
  result["reason"] = reason;
  result.erase("reason_code");
  return result;
}

constexpr const char* kResnetBf16 =
    "resnet50-train batch={} image=224 width=64 classes=1000 dtype={} layout=native conv=direct "
    "lr={}";
constexpr const char* kBertLarge =
    "bert-train model=large batch={} seq=128 dtype=bf16 optimizer=adamw dropout=0.1 lr=0.0001";

std::string resnet(int batch, const std::string& dtype) {
  return fmt::format(fmt::runtime(kResnetBf16), batch, dtype, 0.1 * batch / 256);
}

// A CPU server (baseline.json's host and cases, plus training) and a GPU server (an H200 with
// the same cases at its sizes, a host-device copy, a failed BERT step and a PyTorch peer's).
struct Servers : ::testing::Test {
  nlohmann::json cpu = read_report(std::string(TRAINBENCH_TEST_DATA) + "/baseline.json");
  nlohmann::json gpu = cpu, peer = cpu;

  void SetUp() override {
    cpu["host"]["hostname"] = "cpu-server";
    auto& cpu_results = cpu["results"];  // GEMM 1024 0.359 TFLOP/s, triad 33.77 GB/s, conv mb=16
    cpu_results.push_back(
        result_like(cpu, resnet(32, "bf16"), "cpu-onednn", "bf16", "samples_per_s", 20));
    cpu_results.push_back(
        result_like(cpu, fmt::format(kBertLarge, 4), "cpu-onednn", "bf16", "samples_per_s", 2));
    cpu_results.push_back(
        result_like(cpu, "ttt-mlm dtype=bf16", "cpu-onednn", "bf16", "time_to_train_s", 70));
    cpu_results.push_back(
        unpassed(result_like(cpu, resnet(32, "tf32"), "cpu-onednn", "tf32", "samples_per_s", 0),
                 "unimplemented", "conv1 (conv): cpu-onednn has no tf32 path"));

    gpu["host"]["hostname"] = "gpu-server";
    gpu["host"]["cpu_model"] = "AMD EPYC 9454";
    nlohmann::json backend = gpu["backends"][0];
    backend["name"] = "cuda";
    backend["device"]["kind"] = "gpu";
    backend["device"]["model"] = "NVIDIA H200";
    gpu["backends"] = nlohmann::json::array({backend});
    auto& g = gpu["results"] = nlohmann::json::array();
    g.push_back(result_like(cpu,
                            "gemm m=8192 n=8192 k=8192 dtype=f32 out=f32 ta=n tb=n alpha=1 "
                            "beta=0 layout=plain",
                            "cuda", "f32", "tflops", 50));
    g.back()["energy"] = {
        {"source", "NVML"}, {"seconds", 2.0}, {"joules", 1400.0}, {"average_w", 700.0}};
    g.push_back(result_like(cpu, "stream op=triad n=268435456", "cuda", "f64", "gbps", 3000));
    g.push_back(result_like(cpu,
                            "conv mb=256 ic=64 ih=56 iw=56 oc=64 kh=3 kw=3 sh=1 sw=1 ph=1 "
                            "pw=1 dir=fwd dtype=f32",
                            "cuda", "f32", "tflops", 100));
    g.push_back(result_like(cpu, "transfer dir=h2d bytes=1073741824 memory=pinned", "cuda", "f32",
                            "gbps", 55));
    g.push_back(result_like(cpu, resnet(256, "bf16"), "cuda", "bf16", "samples_per_s", 3000));
    g.push_back(result_like(cpu, resnet(256, "tf32"), "cuda", "tf32", "samples_per_s", 1500));
    g.push_back(
        unpassed(result_like(cpu, fmt::format(kBertLarge, 32), "cuda", "bf16", "samples_per_s", 0),
                 "failed", "validation failed: attention off by 0.1"));

    // The PyTorch peer's report on the GPU server: its host, no device, a passed BERT step.
    peer["host"] = gpu["host"];
    peer["tool"]["name"] = "pytorch_reference";
    peer["backends"] = nlohmann::json::array({peer["backends"][0]});
    peer["backends"][0]["name"] = "pytorch-cuda";
    peer["results"] = nlohmann::json::array({result_like(
        cpu, fmt::format(kBertLarge, 32), "pytorch-cuda", "bf16", "samples_per_s", 413.6)});
  }

  // The machines as `summary` groups them from bench/results-like folders.
  std::vector<HostReports> machines(Costs cpu_costs = {}, Costs gpu_costs = {}) {
    return group_by_machine({{"results/cpu-server/trainbench-full.json", cpu, cpu_costs},
                             {"results/gpu-server/trainbench-gpu.json", gpu, gpu_costs},
                             {"results/gpu-server/pytorch-bert.json", peer, gpu_costs}});
  }
  Answer table(const std::vector<HostReports>& grouped) {
    std::vector<MachineReport> reports;
    for (const HostReports& m : grouped) reports.push_back({m.label, &m.report, m.costs});
    return buyers_table_answer(reports);
  }
};

// The rows of one family, in table order.
std::vector<nlohmann::json> rows_of(const Answer& a, const std::string& workload) {
  std::vector<nlohmann::json> rows;
  for (const nlohmann::json& row : a.data["rows"])
    if (row["workload"] == workload) rows.push_back(row);
  return rows;
}

// Each entry's text fields, joined by " | ", in order.
std::vector<std::string> fields_of(const nlohmann::json& entries,
                                   std::initializer_list<const char*> keys) {
  std::vector<std::string> lines;
  for (const nlohmann::json& entry : entries) {
    std::string line;
    for (const char* key : keys)
      line += (key == *keys.begin() ? "" : " | ") + entry[key].get<std::string>();
    lines.push_back(line);
  }
  return lines;
}

TEST_F(Servers, EveryRowPairsAFamilyAtEachMachinesSize) {
  const std::vector<HostReports> grouped = machines({4.0, 300.0}, {12.0, 1000.0});
  ASSERT_EQ(grouped.size(), 2u);
  const Answer a = table(grouped);
  EXPECT_EQ(a.data["machines"][0]["label"], "gpu-server");  // the GPU machine first
  EXPECT_EQ(a.data["baseline"], "cpu-server");
  const std::vector<std::string> order =
      fields_of(a.data["rows"], {"workload", "machine", "backend", "size"});
  const std::vector<std::string> expected = {
      "bert-train model=large dtype=bf16 | gpu-server | pytorch-cuda | batch=32",
      "bert-train model=large dtype=bf16 | cpu-server | cpu-onednn | batch=4",
      "resnet50-train dtype=bf16 | gpu-server | cuda | batch=256",
      "resnet50-train dtype=bf16 | cpu-server | cpu-onednn | batch=32",
      "resnet50-train dtype=tf32 | gpu-server | cuda | batch=256",
      "ttt-mlm dtype=bf16 | cpu-server | cpu-onednn | ",
      "conv ic=64 ih=56 oc=64 kh=3 ph=1 dir=fwd dtype=f32 | gpu-server | cuda | mb=256",
      "conv ic=64 ih=56 oc=64 kh=3 ph=1 dir=fwd dtype=f32 | cpu-server | cpu-onednn | mb=16",
      "gemm dtype=f32 (square) | gpu-server | cuda | m=n=k=8192",
      "gemm dtype=f32 (square) | cpu-server | cpu-onednn | m=n=k=1024",
      "stream op=triad | gpu-server | cuda | n=268435456",
      "stream op=triad | cpu-server | cpu-onednn | n=16777216",
      "transfer dir=h2d | gpu-server | cuda | bytes=1073741824"};
  EXPECT_EQ(order, expected) << a.data["rows"].dump(1);

  // ResNet-50 bf16: 3000 against 20 images/s at batches 256 and 32, a step of the global batch
  // 256 on each, and the projected time-to-train of the full-size model.
  const auto resnet_rows = rows_of(a, "resnet50-train dtype=bf16");
  EXPECT_NEAR(resnet_rows[0]["over_baseline"].get<double>(), 150, 1e-9);
  EXPECT_TRUE(resnet_rows[0]["sizes_differ"].get<bool>());
  EXPECT_EQ(resnet_rows[1]["global_batch"], 256);
  EXPECT_NEAR(resnet_rows[1]["step_s"].get<double>(), 256.0 / 20, 1e-9);
  EXPECT_NEAR(resnet_rows[0]["step_s"].get<double>(), 256.0 / 3000, 1e-12);
  EXPECT_EQ(resnet_rows[0]["time_to_train"], "projected");
  EXPECT_NEAR(resnet_rows[1]["time_to_train_s"].get<double>() /
                  resnet_rows[0]["time_to_train_s"].get<double>(),
              150, 1e-9);
  // The peer's BERT figure is listed, its ratio beside it, but not the machine's figure.
  EXPECT_NEAR(rows_of(a, "bert-train model=large dtype=bf16")[0]["over_baseline"].get<double>(),
              206.8, 1e-9);
  EXPECT_EQ(rows_of(a, "ttt-mlm dtype=bf16")[0]["time_to_train"], "measured");
  // GEMM energy: the 700 W measured over the case; the rest at the powers given.
  const auto gemm = rows_of(a, "gemm dtype=f32 (square)");
  EXPECT_EQ(gemm[0]["power"], "measured 700 W (NVML)");
  EXPECT_NEAR(gemm[0]["joules_per_unit"].get<double>(), 700.0 / 50, 1e-12);
  EXPECT_EQ(gemm[1]["power"], "given 300 W");
  EXPECT_NEAR(gemm[1]["usd_per_unit"].get<double>(), 4.0 / 3600 / 0.359028635489369, 1e-12);

  // Four families in common, the peer's BERT not among them; training 150x; GEMM's energy at the
  // 700 W measured, the others' at 1000 W given, against 300 W; cost at 12 against 4 $/h.
  EXPECT_NE(a.answer.find(
                "gpu-server over cpu-server: throughput 88.8x to 260x over 4 families "
                "(training 150x: an hour's training here takes cpu-server 150 h), energy per unit "
                "0.0128x to 0.0375x"),
            std::string::npos)
      << a.answer;
  EXPECT_NE(a.answer.find("cost per unit 0.0115x to 0.0338x"), std::string::npos) << a.answer;
}

TEST_F(Servers, EveryMissingFigureSaysWhyAndWhichCaseWouldAnswerIt) {
  const Answer a = table(machines());
  const std::vector<std::string> missing =
      fields_of(a.data["not_answered"], {"workload", "machine", "why", "command"});
  const std::vector<std::string> expected = {
      "bert-train model=large dtype=bf16 | gpu-server | failed on cuda: validation failed: "
      "attention off by 0.1 (a PyTorch peer's figure is listed) | trainbench run -b cuda -w '" +
          fmt::format(kBertLarge, 32) + "'",
      "resnet50-train dtype=tf32 | cpu-server | unimplemented on cpu-onednn: conv1 (conv): "
      "cpu-onednn has no tf32 path | trainbench run -b cpu-onednn -w '" +
          resnet(32, "tf32") + "'",
      // Not run on the GPU server: its suite's case.
      "ttt-mlm dtype=bf16 | gpu-server | not run | trainbench run -b cuda -w 'ttt-mlm dtype=bf16'",
      "transfer dir=h2d | cpu-server | no GPU: host-device copies need one | "};
  EXPECT_EQ(missing, expected) << a.data["not_answered"].dump(1);
  ASSERT_EQ(a.tables.size(), 2u);
  EXPECT_NE(a.answer.find("energy per unit needs a measured power or --watts for both"),
            std::string::npos)
      << a.answer;
  EXPECT_NE(a.answer.find("cost per unit needs --price-per-hour for both"), std::string::npos);
  EXPECT_NE(a.answer.find("4 figure(s) of a machine not answered"), std::string::npos);

  // One machine: its figures, and how to ask for a comparison.
  const std::vector<HostReports> one = group_by_machine({{"cpu.json", cpu, {}}});
  const Answer alone = table(one);
  EXPECT_EQ(alone.answer.rfind("not compared: one machine, cpu.json", 0), 0u) << alone.answer;
  EXPECT_EQ(alone.data["rows"].size(), 6u);
}

// A family the GPU machine did not run is asked for with its own suites' case: the gpu suite's
// ResNet-50 at batch 256, full's DeepBench line for BERT's FFN GEMM.
TEST_F(Servers, ACaseNotRunIsAskedForAtTheMachinesNaturalSize) {
  gpu["results"].erase(gpu["results"].begin() + 4);  // the GPU's ResNet-50 bf16
  cpu["results"].push_back(result_like(cpu,
                                       "gemm name=bert.ffn2 m=1024 n=768 k=3072 dtype=f32 "
                                       "out=f32 ta=n tb=t alpha=1 beta=0 layout=plain",
                                       "cpu-onednn", "f32", "tflops", 0.4));
  const Answer a = table(machines());
  std::map<std::string, std::string> commands;
  for (const nlohmann::json& m : a.data["not_answered"])
    if (m["machine"] == "gpu-server") commands[m["workload"]] = m["command"];
  EXPECT_EQ(commands["resnet50-train dtype=bf16"],
            "trainbench run -b cuda -w 'resnet50-train batch=256 dtype=bf16'");
  EXPECT_EQ(commands["gemm m=1024 n=768 k=3072 dtype=f32 tb=t"],
            "trainbench run -b cuda -w 'gemm name=bert.ffn2 m=1024 n=768 k=3072 ta=n tb=t "
            "dtype=f32'");
}

// Many single-op families a machine did not run (a CPU's full suite on a GPU machine) are one row
// of the text table, with the suite that runs them all; the JSON still lists every one.
TEST_F(Servers, ManyFamiliesNotRunAreOneRowWithOneCommand) {
  for (const char* direction : {"bwd_data", "bwd_weights"})
    for (const char* dtype : {"f32", "bf16"})
      cpu["results"].push_back(result_like(
          cpu,
          fmt::format("conv name=layer1.conv2 mb=16 ic=64 ih=56 iw=56 oc=64 kh=3 kw=3 sh=1 sw=1 "
                      "ph=1 pw=1 dir={} dtype={}",
                      direction, dtype),
          "cpu-onednn", dtype, "tflops", 0.3));
  const Answer a = table(machines());
  EXPECT_EQ(a.data["not_answered"].size(), 8u);
  const std::string text = a.tables.back().render(TableFormat::table);
  EXPECT_NE(text.find("conv (4 families)"), std::string::npos) << text;
  EXPECT_NE(text.find("trainbench run -b cuda --suite full"), std::string::npos) << text;
  EXPECT_EQ(text.find("dir=bwd_data"), std::string::npos) << text;
  EXPECT_NE(text.find("resnet50-train dtype=tf32"), std::string::npos) << text;  // alone
}

// The AdamW state per parameter comes from what each BERT step measured (details.optimizer),
// once per backend and dtype; SGD's steps do not answer it.
TEST(SummaryAnswers, AdamwStatePerParameterIsTheMeasuredOne) {
  const nlohmann::json report = read_report(std::string(TRAINBENCH_TEST_DATA) + "/cpu_models.json");
  const std::vector<Answer> answers = summary_answers(report);
  const auto state = std::find_if(answers.begin(), answers.end(), [](const Answer& a) {
    return a.question == "Training-state memory per parameter with AdamW";
  });
  ASSERT_NE(state, answers.end());
  EXPECT_EQ(state->answer,
            "cpu-onednn [f32]: 8.0 bytes of AdamW moments (measured), 16.0 with the fp32 weights "
            "and gradients; cpu-openblas [f32]: 8.0 bytes of AdamW moments (measured), 16.0 with "
            "the fp32 weights and gradients")
      << state->answer;
  EXPECT_EQ(state->from.size(), 2u);
}

TEST(CaseFamilies, SizesComeOutAndDefaultsGoIn) {
  const CaseFamily line = case_family("resnet50-train batch=32 image=224 dtype=bf16");
  const CaseFamily canonical = case_family(resnet(256, "bf16"));
  EXPECT_EQ(line.key, canonical.key);
  EXPECT_EQ(line.label, "resnet50-train dtype=bf16");
  EXPECT_EQ(canonical.size, "batch=256");
  EXPECT_EQ(case_family("gemm m=2048 dtype=bf16").key,
            case_family("gemm m=8192 n=8192 k=8192 dtype=bf16").key);
  EXPECT_NE(case_family("gemm m=2048 n=1024 dtype=bf16").key,
            case_family("gemm m=8192 dtype=bf16").key);
  EXPECT_NE(case_family("bert-train model=large dtype=bf16").key,
            case_family("bert-train model=base dtype=bf16").key);
  EXPECT_NE(case_family("resnet50-train dtype=bf16").key,
            case_family("resnet50-train dtype=bf16 layout=plain").key);
  EXPECT_EQ(case_family("conv mb=16 ic=64 ih=56 oc=64 kh=3").size, "mb=16");
  EXPECT_EQ(case_family("allreduce bytes=1M", 4).label, "allreduce dtype=f32 at 4 rank(s)");
  EXPECT_THROW(case_family("resnet51-train batch=2"), UsageError);
}

// Every training case of the gpu suite has its family in full, at a CPU's size (docs/workloads.md).
TEST(CaseFamilies, FullPairsEveryTrainingCaseOfTheGpuSuite) {
  std::set<std::string> full;
  for (const Descriptor& d : load_suite("full")) full.insert(case_family(d.to_string()).key);
  int training = 0;
  for (const Descriptor& d : load_suite("gpu")) {
    const CaseFamily family = case_family(d.to_string());
    if (family.kind != CaseClass::training && family.kind != CaseClass::time_to_train) continue;
    ++training;
    EXPECT_TRUE(full.count(family.key)) << d.to_string() << " has no pair in the full suite";
  }
  EXPECT_GE(training, 11);
}

TEST_F(Servers, ReportsOfOneHostAreOneMachine) {
  const std::vector<HostReports> grouped = machines({}, {12.0, {}});
  EXPECT_EQ(grouped[1].label, "gpu-server");
  EXPECT_EQ(grouped[1].files.size(), 2u);
  EXPECT_EQ(grouped[1].report["results"].size(), 8u);
  EXPECT_EQ(grouped[1].report["backends"].size(), 2u);  // cuda and the peer's
  EXPECT_EQ(grouped[1].costs.price_per_hour, 12.0);
  // Two machines in one folder are named by their files.
  const auto shared = group_by_machine({{"x/cpu.json", cpu, {}}, {"x/gpu.json", gpu, {}}});
  EXPECT_EQ(shared[0].label, "cpu.json");
  EXPECT_EQ(shared[1].label, "gpu.json");
  // One machine's reports at two prices, or a report given twice, are bad input.
  EXPECT_THROW(group_by_machine({{"g/a.json", gpu, {12.0, {}}}, {"g/b.json", peer, {10.0, {}}}}),
               UsageError);
  EXPECT_THROW(group_by_machine({{"a.json", cpu, {}}, {"./a.json", cpu, {}}}), UsageError);
}

// Read as one report, the GPU machine's cases meet the CPU machine's in summary's GPU-over-CPU
// answer; a backend both machines ran keeps each machine's results apart by name.
TEST_F(Servers, MergedAnswersPairTheMachines) {
  gpu["results"][0]["workload"] = cpu["results"][0]["workload"];
  const nlohmann::json merged = merged_report({{"cpu.json", &cpu, {}}, {"gpu.json", &gpu, {}}});
  EXPECT_EQ(merged["results"].size(), cpu["results"].size() + gpu["results"].size());
  EXPECT_NE(summary_answers(merged)[0].answer.find("139.3x for gemm"), std::string::npos)
      << summary_answers(merged)[0].answer;
  const nlohmann::json both_cpu = merged_report({{"a.json", &cpu, {}}, {"b.json", &cpu, {}}});
  EXPECT_EQ(both_cpu["backends"][0]["name"], "cpu-onednn on a.json");
  EXPECT_EQ(both_cpu["results"][cpu["results"].size()]["backend"], "cpu-onednn on b.json");
}

}  // namespace
}  // namespace tb
