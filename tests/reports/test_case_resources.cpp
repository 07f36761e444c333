// A case's memory against its computed footprint, and its energy from telemetry.
#include <gtest/gtest.h>

#include "reports/case_resources.h"
#include "reports/report.h"
#include "reports/summary.h"

namespace tb {
namespace {

constexpr std::uint64_t kMiB = 1u << 20;

CaseMemory cpu_case(std::uint64_t allocated_peak, std::uint64_t resident_growth) {
  CaseMemory m;
  m.computed_bytes = 100 * kMiB;
  m.allowance_bytes = 256 * kMiB;
  m.allocated_peak_bytes = allocated_peak;
  m.resident_start_bytes = 50 * kMiB;
  m.resident_peak_bytes = m.resident_start_bytes + resident_growth;
  m.resident_peak_reset = true;
  m.device_is_host = true;
  return m;
}

TEST(CaseMemory, WithinTheAllowanceIsNotFlagged) {
  CaseMemory m = cpu_case(101 * kMiB, 300 * kMiB);
  flag_memory(m);
  EXPECT_EQ(m.flag, "");
  EXPECT_EQ(to_json(m).count("flag"), 0u);
}

// Planted excesses: each measured peak past footprint plus allowance is flagged, saying which.
TEST(CaseMemory, APeakPastTheAllowanceIsFlaggedWithWhich) {
  CaseMemory allocator = cpu_case(357 * kMiB, 0);
  flag_memory(allocator);
  EXPECT_NE(allocator.flag.find("the backend's allocations peaked at 357.0 MiB"), std::string::npos)
      << allocator.flag;
  CaseMemory process = cpu_case(100 * kMiB, 357 * kMiB);
  flag_memory(process);
  EXPECT_NE(process.flag.find("the process grew by 357.0 MiB"), std::string::npos) << process.flag;
  EXPECT_EQ(to_json(process)["flag"], process.flag);
  // One byte less is within it.
  CaseMemory edge = cpu_case(356 * kMiB, 356 * kMiB);
  flag_memory(edge);
  EXPECT_EQ(edge.flag, "");
}

// The timed peak is what the workload holds and what is flagged; the case's peak (validation's
// buffers beside the step) is recorded but judged only where no timed peak was taken.
TEST(CaseMemory, TheTimedPeakIsJudgedWhereItWasTaken) {
  CaseMemory m = cpu_case(900 * kMiB, 0);
  m.timed_allocated_peak_bytes = 120 * kMiB;
  flag_memory(m);
  EXPECT_EQ(m.flag, "");
  EXPECT_EQ(to_json(m)["allocated_peak_bytes"], 900 * kMiB);
  EXPECT_EQ(to_json(m)["timed_allocated_peak_bytes"], 120 * kMiB);
  m.timed_allocated_peak_bytes = 400 * kMiB;
  flag_memory(m);
  EXPECT_NE(m.flag.find("peaked at 400.0 MiB while timed"), std::string::npos) << m.flag;
}

// The process's growth counts only where its memory is the device's and the mark was reset.
TEST(CaseMemory, GrowthIsComparedOnlyWhereItMeansTheFootprint) {
  CaseMemory gpu = cpu_case(100 * kMiB, 900 * kMiB);
  gpu.device_is_host = false;
  flag_memory(gpu);
  EXPECT_EQ(gpu.flag, "");
  CaseMemory unreset = cpu_case(100 * kMiB, 900 * kMiB);
  unreset.resident_peak_reset = false;
  flag_memory(unreset);
  EXPECT_EQ(unreset.flag, "");
}

TEST(CaseEnergy, RateHeadlinesGetAFigurePerJoule) {
  const nlohmann::json telemetry = {{"source", "powercap"}, {"seconds", 4.0}, {"energy_j", 200.0}};
  const Headline samples{"samples_per_s", "samples/s", "", false};
  const std::optional<CaseEnergy> e = case_energy(telemetry, samples, 25.0);
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(*e->joules, 200.0);
  EXPECT_DOUBLE_EQ(*e->average_w, 50.0);
  EXPECT_DOUBLE_EQ(*e->per_joule, 0.5);
  EXPECT_EQ(e->per_joule_unit, "samples/J");
  const nlohmann::json written = to_json(*e);
  EXPECT_EQ(written["per_joule"]["unit"], "samples/J");
  const std::optional<CaseEnergy> read = read_case_energy({{"energy", written}});
  ASSERT_TRUE(read);
  EXPECT_DOUBLE_EQ(*read->per_joule, 0.5);
  // A time (lower is better) has joules but no rate per joule.
  const Headline time{"time_to_train_s", "s", "", true};
  const std::optional<CaseEnergy> timed = case_energy(telemetry, time, 60.0);
  EXPECT_TRUE(timed->joules);
  EXPECT_FALSE(timed->per_joule);
}

TEST(CaseEnergy, TelemetryWithoutAFigureSaysWhy) {
  const nlohmann::json none = {{"source", "powercap"},
                               {"seconds", 1.0},
                               {"energy_unavailable", "no powercap interface at /x"}};
  const std::optional<CaseEnergy> e = case_energy(none, std::nullopt, std::nullopt);
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->joules);
  EXPECT_EQ(to_json(*e)["unavailable"], "no powercap interface at /x");
  // Telemetry that says nothing of energy makes no record.
  EXPECT_FALSE(case_energy({{"source", "NVML"}, {"seconds", 1.0}}, std::nullopt, std::nullopt));
}

// compare's per-watt figures use the power a case measured, and the given one elsewhere, and
// say which; summary answers with the measured energy, or why there is none.
TEST(CaseEnergy, MeasuredPowerComesBeforeTheGivenOne) {
  nlohmann::json report = read_report(std::string(TRAINBENCH_TEST_DATA) + "/baseline.json");
  nlohmann::json* measured_case = nullptr;
  for (nlohmann::json& result : report["results"])
    if (result["status"] == "passed" && result["workload"].get<std::string>().rfind("gemm", 0) == 0)
      measured_case = &result;
  ASSERT_NE(measured_case, nullptr);
  (*measured_case)["energy"] = {{"source", "powercap"},
                                {"seconds", 2.0},
                                {"joules", 100.0},
                                {"average_w", 50.0},
                                {"per_joule", {{"value", 0.1}, {"unit", "TFLOP/J"}}}};
  const nlohmann::json lines = headline_lines(report, Costs{std::nullopt, 300.0});
  int measured = 0, given = 0;
  for (const nlohmann::json& line : lines) {
    if (line["watts_source"] == "measured (powercap)") {
      ++measured;
      EXPECT_DOUBLE_EQ(line["per_watt"].get<double>(), line["value"].get<double>() / 50.0);
    } else {
      ++given;
      EXPECT_EQ(line["watts_source"], "given");
      EXPECT_DOUBLE_EQ(line["watts"].get<double>(), 300.0);
    }
  }
  EXPECT_EQ(measured, 1) << lines.dump();
  EXPECT_GT(given, 0);

  const auto answers = summary_answers(report);
  const Answer& energy = answers.back();
  EXPECT_EQ(energy.answer, "measured for 1 case");
  ASSERT_EQ(energy.from.size(), 1u);
  EXPECT_NE(energy.from[0].find("0.1 TFLOP/J, 50.0 W over 2.0 s (powercap;"), std::string::npos)
      << energy.from[0];
  measured_case->erase("energy");
  EXPECT_EQ(summary_answers(report).back().answer,
            "not measured: no case in this report read an energy counter");
}

}  // namespace
}  // namespace tb
