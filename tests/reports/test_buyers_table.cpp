// The buyer's table of two machines' reports: throughput ratio, energy and cost per unit of work,
// and the answers of both reports read as one.
#include <gtest/gtest.h>

#include "reports/buyers_table.h"
#include "reports/report.h"

namespace tb {
namespace {

// The CPU machine: baseline.json (cpu-onednn: GEMM 0.359 TFLOP/s, STREAM, conv). The GPU machine:
// the same cases on "cuda" at 100 times the throughput, its GEMM with a measured 700 W.
struct TwoMachines : ::testing::Test {
  nlohmann::json cpu = read_report(std::string(TRAINBENCH_TEST_DATA) + "/baseline.json");
  nlohmann::json gpu = cpu;

  void SetUp() override {
    nlohmann::json& backend = gpu["backends"][0];
    backend["name"] = "cuda";
    backend["device"]["kind"] = "gpu";
    backend["device"]["model"] = "NVIDIA H200";
    gpu["backends"] = nlohmann::json::array({backend});
    for (nlohmann::json& result : gpu["results"]) {
      result["backend"] = "cuda";
      for (const char* metric : {"tflops", "gbps"})
        if (result["metrics"].contains(metric))
          result["metrics"][metric] = 100 * result["metrics"][metric].get<double>();
      for (nlohmann::json& s : result["samples_s"]) s = s.get<double>() / 100;
    }
    gpu["results"][0]["energy"] = {
        {"source", "NVML"}, {"seconds", 2.0}, {"joules", 1400.0}, {"average_w", 700.0}};
  }
  // The CPU machine given first: the GPU machine is put first all the same.
  Answer table(Costs cpu_costs, Costs gpu_costs) {
    return buyers_table_answer({{"cpu.json", &cpu, cpu_costs}, {"gpu.json", &gpu, gpu_costs}});
  }
};

TEST_F(TwoMachines, RatiosAreTheGpuMachinesOverTheCpuMachines) {
  const Answer a = table({4.0, 300.0}, {12.0, 1000.0});
  ASSERT_EQ(a.data["rows"].size(), 3u) << a.data.dump();
  EXPECT_EQ(a.data["machines"][0]["label"], "gpu.json");
  EXPECT_EQ(a.data["machines"][0]["device"], "NVIDIA H200");
  for (const nlohmann::json& row : a.data["rows"]) {
    EXPECT_NEAR(row["speed_ratio"].get<double>(), 100, 1e-9) << row.dump();
    // Cost per unit: 12 $/h at 100 times the throughput against 4 $/h.
    EXPECT_NEAR(row["cost_ratio"].get<double>(), 12.0 / (4 * 100), 1e-12);
    const nlohmann::json& gpu_case = row["machines"][0];
    if (row["workload"].get<std::string>().rfind("gemm", 0) == 0) {
      // Energy per TFLOP at the 700 W measured on the GPU against the 300 W given for the CPU.
      EXPECT_EQ(gpu_case["power"], "measured 700 W (NVML)");
      EXPECT_NEAR(row["energy_ratio"].get<double>(), 700.0 / (300 * 100), 1e-12);
      EXPECT_EQ(row["unit_of_work"], "TFLOP");
      EXPECT_NEAR(gpu_case["joules_per_unit"].get<double>(), 700 / gpu_case["value"].get<double>(),
                  1e-9);
    } else {
      EXPECT_EQ(gpu_case["power"], "given 1000 W");
      EXPECT_NEAR(row["energy_ratio"].get<double>(), 1000.0 / (300 * 100), 1e-12);
    }
  }
  EXPECT_EQ(a.answer.rfind("gpu.json (NVIDIA H200) over cpu.json (Intel(R) Xeon(R) Processor) on 3 "
                           "workload(s): throughput 100x, energy per unit 0.0233x to 0.0333x, "
                           "cost per unit 0.03x",
                           0),
            0u)
      << a.answer;
  ASSERT_EQ(a.tables.size(), 1u);
  EXPECT_NE(a.tables[0].render(TableFormat::table).find("$"), std::string::npos);
}

// Without prices or powers the table says what it needs; a workload on one machine only, or one
// that failed there, is counted apart.
TEST_F(TwoMachines, WhatIsMissingIsSaid) {
  gpu["results"][0]["energy"].erase("average_w");
  gpu["results"][1]["status"] = "failed";
  const Answer a = table({}, {});
  EXPECT_EQ(a.data["rows"].size(), 2u);
  EXPECT_NE(a.answer.find("energy per unit needs a measured power or --watts for both"),
            std::string::npos)
      << a.answer;
  EXPECT_NE(a.answer.find("cost per unit needs --price-per-hour for both"), std::string::npos);
  EXPECT_NE(a.answer.find("; 1 workload(s) ran on one machine only"), std::string::npos);
  const Answer one = buyers_table_answer({{"cpu.json", &cpu, {}}});
  EXPECT_EQ(one.answer.rfind("not compared: one report", 0), 0u);
}

// Read as one report, the GPU machine's cases meet the CPU machine's in summary's GPU-over-CPU
// answer; a backend both machines ran keeps each machine's results apart by name.
TEST_F(TwoMachines, MergedAnswersPairTheMachines) {
  const nlohmann::json merged = merged_report({{"cpu.json", &cpu, {}}, {"gpu.json", &gpu, {}}});
  EXPECT_EQ(merged["results"].size(), 6u);
  EXPECT_NE(summary_answers(merged)[0].answer.find("100.0x for gemm"), std::string::npos)
      << summary_answers(merged)[0].answer;
  const nlohmann::json both_cpu = merged_report({{"a.json", &cpu, {}}, {"b.json", &cpu, {}}});
  EXPECT_EQ(both_cpu["backends"][0]["name"], "cpu-onednn on a.json");
  EXPECT_EQ(both_cpu["results"][5]["backend"], "cpu-onednn on b.json");
}

}  // namespace
}  // namespace tb
