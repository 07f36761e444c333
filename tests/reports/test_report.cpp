#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>

#include <fmt/format.h>

#include "reports/html.h"
#include "reports/json_schema.h"
#include "reports/report.h"
#include "reports/result_record.h"
#include "tests/temp_dir.h"

namespace tb {
namespace {

namespace fs = std::filesystem;

class ReportFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("trainbench-report-test-{}", getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

nlohmann::json minimal_header() {
  return {
      {"schema_version", kReportSchemaVersion},
      {"tool",
       {{"name", "trainbench"}, {"version", "0"}, {"git_commit", "x"}, {"build_type", "Release"}}},
      {"started_at", "2026-11-30T00:00:00Z"},
      {"finished_at", nullptr},
      {"command", "trainbench run"},
      {"settings",
       {{"threads", 0},
        {"pin", "cores"},
        {"seed", 42},
        {"suite", "quick"},
        {"warmup_runs", 2},
        {"warmup_seconds", 0.1},
        {"min_repetitions", 5},
        {"max_repetitions", 100},
        {"time_budget_seconds", 1.0},
        {"min_sample_seconds", 0.001}}},
      {"host",
       {{"hostname", "h"},
        {"cpu_model", "cpu"},
        {"sockets", 1},
        {"cores", 2},
        {"logical_cpus", 2},
        {"memory_bytes", 1},
        {"numa_nodes", 1},
        {"isa", {"avx2"}},
        {"caches", nlohmann::json::array()},
        {"os", "os"},
        {"kernel", "k"},
        {"compiler", "c"},
        {"libraries", nlohmann::json::array()},
        {"environment", {{"OMP_NUM_THREADS", "2"}}}}},
      {"backends", nlohmann::json::array()}};
}

CaseResult passed_case() {
  CaseResult r;
  r.workload = "gemm m=8 n=8 k=8 dtype=f32 out=f32 ta=n tb=n alpha=1 beta=0 layout=plain";
  r.backend = "cpu-onednn";
  r.dtype = "f32";
  r.end(CaseStatus::passed, ReasonCode::none, "");
  r.implementation = "brg:avx512_core";
  r.math_mode = "strict";
  r.validation = Validation{true, "Freivalds", 1e-7, 1e-5, 264, ""};
  r.samples_s = {1e-3, 2e-3, 1.5e-3};
  r.units_per_sample = 4;
  r.warmup_runs = 2;
  r.stats = summarize(r.samples_s);
  CaseMetrics m;
  m.flops = 1024;
  m.tflops = 1024 / 1.5e-3 / 1e12;
  m.percent_of_peak = 12.5;
  r.metrics = m;
  return r;
}

// The passed case under a descriptor of its own (a report holds each case once).
CaseResult passed_case(int number) {
  CaseResult r = passed_case();
  r.workload += " seed=" + std::to_string(number);
  return r;
}

TEST_F(ReportFiles, WriteThenReadValidates) {
  ReportWriter writer(path("r.json"), ReportFormat::json, minimal_header());
  writer.set("backends", nlohmann::json::array());
  EXPECT_FALSE(fs::exists(path("r.json")));  // nothing before a case finished
  writer.add(passed_case());
  EXPECT_EQ(read_report(path("r.json"))["results"].size(), 1u);  // valid after each case
  CaseResult failed;
  failed.workload = "gemm m=1";
  failed.backend = "cpu-onednn";
  failed.dtype = "f32";
  failed.status = CaseStatus::failed;
  failed.reason = "validation failed: boom";
  writer.add(failed);
  writer.finish("2026-11-30T00:01:00Z");
  const nlohmann::json report = read_report(path("r.json"));
  ASSERT_EQ(report["results"].size(), 2u);
  const auto& first = report["results"][0];
  EXPECT_EQ(first["status"], "passed");
  EXPECT_EQ(first["samples_s"].size(), 3u);
  EXPECT_DOUBLE_EQ(first["stats"]["median_s"].get<double>(), 1.5e-3);
  EXPECT_DOUBLE_EQ(first["metrics"]["percent_of_peak"].get<double>(), 12.5);
  EXPECT_FALSE(first["metrics"].contains("gbps"));  // absent where it does not apply
  EXPECT_EQ(report["results"][1]["reason"], "validation failed: boom");
  EXPECT_TRUE(report["results"][1]["stats"].is_null());
  EXPECT_EQ(report["finished_at"], "2026-11-30T00:01:00Z");
  for (const auto& entry : fs::directory_iterator(dir_))  // no temporary files left behind
    EXPECT_EQ(entry.path().filename(), "r.json");
}

// A result carries its workload's headline; one from a report written before results did
// gets the headline derived from its workload kind, as compare and summary read it then.
TEST_F(ReportFiles, ResultsCarryTheirHeadlineAndOldOnesDeriveIt) {
  ReportWriter writer(path("r.json"), ReportFormat::json, minimal_header());
  CaseResult stored = passed_case();
  stored.headline = Headline{"tflops", "TFLOP/s", "GEMM f32"};
  writer.add(stored);
  CaseResult stream = passed_case();
  stream.workload = "stream op=copy n=1024";  // an old report: no headline recorded
  stream.metrics->gbps = 12.5;
  writer.add(stream);
  CaseResult ttt = passed_case();
  ttt.workload = "ttt-mlm target=0.175";
  ttt.details = {{"time_to_train_s", 99.0}};
  writer.add(ttt);
  const nlohmann::json report = read_report(path("r.json"));  // validates against the schema
  const auto& results = report["results"];
  EXPECT_EQ(results[0]["headline"]["unit"], "TFLOP/s");
  EXPECT_FALSE(results[1].contains("headline"));

  const auto gemm = result_headline(results[0]);
  ASSERT_TRUE(gemm);
  EXPECT_EQ(gemm->headline.figure, "GEMM f32");
  EXPECT_DOUBLE_EQ(gemm->value, 1024 / 1.5e-3 / 1e12);
  const auto bandwidth = result_headline(results[1]);
  ASSERT_TRUE(bandwidth);
  EXPECT_EQ(bandwidth->headline.figure, kMemoryBandwidthFigure);
  EXPECT_DOUBLE_EQ(bandwidth->value, 12.5);
  const auto time = result_headline(results[2]);
  ASSERT_TRUE(time);
  EXPECT_EQ(time->headline.unit, "s");
  EXPECT_TRUE(time->headline.lower_is_better);
  EXPECT_DOUBLE_EQ(time->value, 99.0);
  nlohmann::json failed = results[0];
  failed["status"] = "failed";
  EXPECT_FALSE(result_headline(failed));
}

// What the runner writes, the reader gives back typed: each status with its code and reason.
TEST_F(ReportFiles, ResultsReadBackAsTypedRecords) {
  ReportWriter writer(path("r.json"), ReportFormat::json, minimal_header());
  writer.add(passed_case());
  const std::vector<std::tuple<CaseStatus, ReasonCode, std::string>> outcomes = {
      {CaseStatus::failed, ReasonCode::validation_failed, "validation failed: error 0.3"},
      {CaseStatus::skipped, ReasonCode::not_enough_memory, "does not fit in memory: needs 9 GiB"},
      {CaseStatus::unimplemented, ReasonCode::isa_lacking, "bf16 needs AVX512_CORE"}};
  for (const auto& [status, code, reason] : outcomes) {
    CaseResult result = passed_case(static_cast<int>(status));
    result.end(status, code, reason);
    result.stats.reset();
    result.samples_s.clear();
    result.metrics.reset();
    writer.add(result);
  }
  const nlohmann::json report = read_report(path("r.json"));
  const std::vector<ResultRecord> records = read_results(report);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_TRUE(records[0].passed());
  EXPECT_EQ(records[0].reason_code, ReasonCode::none);
  ASSERT_TRUE(records[0].stats);
  EXPECT_DOUBLE_EQ(records[0].seconds(RunStatistic::median), 1.5e-3);
  EXPECT_DOUBLE_EQ(records[0].seconds(RunStatistic::min), 1e-3);
  ASSERT_TRUE(records[0].headline);
  EXPECT_EQ(records[0].metric("percent_of_peak"), 12.5);
  EXPECT_EQ(records[0].key.backend, "cpu-onednn");
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_EQ(records[i + 1].status, std::get<0>(outcomes[i]));
    EXPECT_EQ(records[i + 1].reason_code, std::get<1>(outcomes[i]));
    EXPECT_EQ(records[i + 1].reason, std::get<2>(outcomes[i]));
    EXPECT_FALSE(records[i + 1].stats);
    EXPECT_FALSE(records[i + 1].headline);
  }
}

// A report written before reason codes gets one from its reason's wording; an old failure for
// want of memory reads as the skip the runner records now.
TEST(ResultRecords, OldReportsAreGivenReasonCodes) {
  const std::vector<std::tuple<std::string, std::string, CaseStatus, ReasonCode>> old = {
      {"failed", "does not fit in memory: needs 9.00 GiB, 2.00 GiB available", CaseStatus::skipped,
       ReasonCode::not_enough_memory},
      {"failed", "cpu: needs 3 GiB but only 1 GiB of memory is available", CaseStatus::skipped,
       ReasonCode::not_enough_memory},
      {"failed", "validation failed: error 0.3 exceeds 1e-5", CaseStatus::failed,
       ReasonCode::validation_failed},
      {"failed", "died of SIGFPE during set-up in a function of libdnnl.so.3", CaseStatus::failed,
       ReasonCode::crashed},
      {"failed", "rank 1 (node2): validation failed: error 2", CaseStatus::failed,
       ReasonCode::rank_failed},
      {"failed", "stopped at timing: another rank failed there (see its line)", CaseStatus::failed,
       ReasonCode::rank_failed},
      {"skipped", "backend cuda is not usable here: no GPU", CaseStatus::skipped,
       ReasonCode::backend_unusable},
      {"skipped", "backend cuda broke during an earlier case: Xid", CaseStatus::skipped,
       ReasonCode::backend_broken},
      {"unimplemented", "not timed: cpu-openblas would run reference kernels (conv)",
       CaseStatus::unimplemented, ReasonCode::reference_kernels},
      {"unimplemented", "cuda: no FP8 GEMM with a bias epilogue", CaseStatus::unimplemented,
       ReasonCode::unimplemented},
      {"failed", "oneDNN: could not create a primitive", CaseStatus::failed, ReasonCode::error},
      {"passed", "", CaseStatus::passed, ReasonCode::none}};
  for (const auto& [status, reason, read_status, code] : old) {
    nlohmann::json result = to_json(passed_case());
    result.erase("reason_code");
    result["status"] = status;
    result["reason"] = reason;
    const ResultRecord record = read_result(result);
    EXPECT_EQ(record.status, read_status) << reason;
    EXPECT_EQ(reason_code_name(record.reason_code), reason_code_name(code)) << reason;
  }
  nlohmann::json written = to_json(passed_case());  // a written code is taken as it is
  written["status"] = "failed";
  written["reason"] = "does not fit in memory";
  written["reason_code"] = "library_error";
  EXPECT_EQ(read_result(written).reason_code, ReasonCode::library_error);
  EXPECT_EQ(read_result(written).status, CaseStatus::failed);
  // but a missed time-to-train target, which earlier builds wrote as a library's failure, is not
  written["reason"] =
      "1 of 1 runs missed test accuracy 90% within 2 epochs (best: 89.97%); a missed run counts "
      "as infinitely slow, so the aggregate is infinite";
  EXPECT_EQ(read_result(written).reason_code, ReasonCode::target_missed);
}

// The schema's closed set is the code's, name for name, and every name parses back.
TEST(ResultRecords, SchemaNamesEveryReasonCode) {
  const nlohmann::json& names = report_schema()["$defs"]["reason_code"]["enum"];
  ASSERT_EQ(names.size(), static_cast<std::size_t>(kReasonCodes));
  for (int i = 0; i < kReasonCodes; ++i) {
    const auto code = static_cast<ReasonCode>(i);
    EXPECT_EQ(names[static_cast<std::size_t>(i)].get<std::string>(), reason_code_name(code));
    EXPECT_EQ(parse_reason_code(reason_code_name(code)), code);
  }
  EXPECT_FALSE(parse_reason_code("out of memory"));
  EXPECT_FALSE(parse_case_status("PASSED"));
}

TEST_F(ReportFiles, CorruptFilesAreClearErrors) {
  std::ofstream(path("truncated.json")) << R"({"schema_version": 1, "results": [)";
  std::ofstream(path("other.json")) << R"({"hello": "world"})";
  std::ofstream(path("array.json")) << "[]";
  for (const char* name : {"truncated.json", "other.json", "array.json", "missing.json"}) {
    try {
      read_report(path(name));
      ADD_FAILURE() << name << " was accepted";
    } catch (const ReportError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

TEST_F(ReportFiles, SchemaViolationsAreReported) {
  nlohmann::json report = minimal_header();
  report["results"] = nlohmann::json::array({to_json(passed_case())});
  EXPECT_TRUE(validate_against_schema(report_schema(), report).empty());

  nlohmann::json bad_status = report;
  bad_status["results"][0]["status"] = "fast";
  nlohmann::json missing = report;
  missing["results"][0].erase("samples_s");
  nlohmann::json wrong_type = report;
  wrong_type["host"]["cores"] = "two";
  nlohmann::json extra = report;
  extra["results"][0]["speed"] = 1;
  for (const auto* doc : {&bad_status, &missing, &wrong_type, &extra})
    EXPECT_FALSE(validate_against_schema(report_schema(), *doc).empty()) << doc->dump();

  std::ofstream(path("bad.json")) << bad_status.dump();
  EXPECT_THROW(read_report(path("bad.json")), ReportError);
}

// An existing report is replaced only by one holding a finished case: a run that finishes
// none leaves it as it was, and writes its empty report only where no file was.
TEST_F(ReportFiles, AnExistingReportIsReplacedOnlyByOneWithAFinishedCase) {
  std::ofstream(path("old.json")) << "the old report\n";
  {
    ReportWriter writer(path("old.json"), ReportFormat::json, minimal_header());
    writer.set("backends", nlohmann::json::array());
    writer.finish("2026-11-30T00:01:00Z");
    EXPECT_FALSE(writer.written());
    EXPECT_FALSE(writer.failure());
  }
  EXPECT_EQ(testing_support::file_text(path("old.json")), "the old report\n");
  ReportWriter fresh(path("new.json"), ReportFormat::json, minimal_header());
  fresh.finish("2026-11-30T00:01:00Z");
  EXPECT_TRUE(fresh.written());
  EXPECT_EQ(read_report(path("new.json"))["results"].size(), 0u);
  ReportWriter replacing(path("old.json"), ReportFormat::json, minimal_header());
  replacing.add(passed_case());
  EXPECT_TRUE(replacing.written());
  EXPECT_EQ(read_report(path("old.json"))["results"].size(), 1u);
}

// A write that misses the path (here a report made read-only meanwhile, which even root may
// not replace) goes to a fallback file holding every case; a later write that reaches the
// path again clears the failure.
TEST_F(ReportFiles, AFailedWriteKeepsEveryCaseInTheFallback) {
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved_tmpdir = old_tmpdir ? old_tmpdir : "";
  setenv("TMPDIR", dir_.c_str(), 1);
  ReportWriter writer(path("r.json"), ReportFormat::json, minimal_header());
  writer.add(passed_case());
  fs::permissions(path("r.json"), fs::perms::owner_read);
  writer.add(passed_case(2));
  writer.add(passed_case(3));
  ASSERT_TRUE(writer.failure());
  EXPECT_NE(writer.failure()->reason.find("read-only"), std::string::npos);
  ASSERT_TRUE(writer.failure()->fallback);
  EXPECT_EQ(fs::path(*writer.failure()->fallback).parent_path(), dir_);
  EXPECT_EQ(read_report(*writer.failure()->fallback)["results"].size(), 3u);
  EXPECT_EQ(read_report(path("r.json"))["results"].size(), 1u);  // what it held is kept
  fs::permissions(path("r.json"), fs::perms::owner_read | fs::perms::owner_write);
  writer.finish("2026-11-30T00:01:00Z");
  EXPECT_FALSE(writer.failure());
  EXPECT_EQ(read_report(path("r.json"))["results"].size(), 3u);
  if (old_tmpdir)
    setenv("TMPDIR", saved_tmpdir.c_str(), 1);
  else
    unsetenv("TMPDIR");
}

TEST_F(ReportFiles, UnwritablePathIsAReportError) {
  EXPECT_THROW(ReportWriter(path("no/such/dir/r.json"), ReportFormat::json, minimal_header()),
               ReportError);
  EXPECT_THROW(write_file_atomically("/proc/trainbench.json", "{}"), FileError);
}

TEST_F(ReportFiles, GbenchFormatComesFromGoogleBenchmarksReporter) {
  nlohmann::json report = minimal_header();
  report["results"] = nlohmann::json::array({to_json(passed_case())});
  CaseResult failed = passed_case();
  failed.status = CaseStatus::failed;
  failed.reason = "boom";
  report["results"].push_back(to_json(failed));
  const nlohmann::json gbench = nlohmann::json::parse(to_gbench_json(report));
  ASSERT_TRUE(gbench.contains("context"));
  const auto& runs = gbench["benchmarks"];
  ASSERT_EQ(runs.size(), 3u + 3u + 1u);  // 3 samples, mean / median / stddev, one errored case
  EXPECT_EQ(runs[0]["run_type"], "iteration");
  EXPECT_EQ(runs[0]["iterations"], 4);
  EXPECT_NEAR(runs[0]["real_time"].get<double>(), 1e3, 1e-6);  // microseconds per unit
  EXPECT_EQ(runs[3]["aggregate_name"], "mean");
  EXPECT_NEAR(runs[4]["real_time"].get<double>(), 1.5e3, 1e-6);  // median
  EXPECT_TRUE(runs[0].contains("percent_of_peak"));
  EXPECT_EQ(runs[6]["error_occurred"], true);
}

// A case above its measured peak (a tiny GEMM against a probe slowed by a loaded machine)
// carries a boolean flag among its metrics: a counter of 1, not an error.
TEST_F(ReportFiles, GbenchFormatCarriesTheAboveThePeakFlag) {
  nlohmann::json report = minimal_header();
  CaseResult above = passed_case();
  above.metrics->percent_of_peak = 130;
  above.metrics->above_measured_peak = true;
  report["results"] = nlohmann::json::array({to_json(above)});
  ASSERT_TRUE(report["results"][0]["metrics"]["above_measured_peak"].is_boolean());
  const nlohmann::json gbench = nlohmann::json::parse(to_gbench_json(report));
  EXPECT_EQ(gbench["benchmarks"][0]["above_measured_peak"], 1);
  EXPECT_EQ(gbench["benchmarks"][0]["percent_of_peak"], 130);
}

// Every text a report carries is escaped in the page: keys (a peak's dtype, an environment
// variable) as well as values, so a report cannot put markup or a script into it.
TEST(HtmlPage, EveryTextFromAReportIsEscaped) {
  std::ifstream in(std::string(TRAINBENCH_TEST_DATA) + "/baseline.json");
  nlohmann::json report = nlohmann::json::parse(in);
  report["backends"][0]["peaks"]["<script>alert(1)</script>"] = {{"measured_gflops", 100.0}};
  report["results"][0]["workload"] = "gemm m=8 <img src=x onerror=alert(2)>";
  report["host"]["environment"]["<b>NAME</b>"] = "\"'><svg onload=alert(3)>";
  const std::string page = render_html({{"<i>label</i>", report}});
  for (const char* markup : {"<script>alert", "<img", "<b>NAME", "<svg onload", "<i>label"})
    EXPECT_EQ(page.find(markup), std::string::npos) << markup;
  EXPECT_NE(page.find("&lt;script&gt;alert(1)"), std::string::npos);
  std::size_t scripts = 0;
  for (std::size_t at = page.find("<script"); at != std::string::npos;
       at = page.find("<script", at + 1))
    ++scripts;
  EXPECT_EQ(scripts, 1u);  // the page's own
}

// The page opens with summary's answers, each with its sources; those it cannot answer say why.
// With two machines' reports the buyer's table answers.
TEST(HtmlPage, TheAnswersComeFirst) {
  const nlohmann::json base = read_report(std::string(TRAINBENCH_TEST_DATA) + "/baseline.json");
  const nlohmann::json other =
      read_report(std::string(TRAINBENCH_TEST_DATA) + "/other_machine.json");
  const std::string one = render_html({{"baseline.json", base}});
  ASSERT_NE(one.find("<h2>Answers</h2>"), std::string::npos);
  EXPECT_LT(one.find("<h2>Answers</h2>"), one.find("<h2>Roofline</h2>"));
  EXPECT_NE(one.find("0 of 9 questions answered"), std::string::npos);
  EXPECT_NE(
      one.find(R"(<tr class="unanswered"><th>GPU over CPU speed-up per workload and dtype</th>)"
               "<td>not measured: no case ran on both a GPU and a CPU backend"),
      std::string::npos);
  const std::string two = render_html({{"other_machine.json", other}, {"baseline.json", base}});
  EXPECT_NE(two.find("1 of 9 questions answered"), std::string::npos);
  EXPECT_NE(two.find(R"(<tr class="answered"><th>Buyer&#39;s table)"), std::string::npos);
  EXPECT_NE(two.find("<li>other_machine.json: cpu-onednn gemm m=1024"), std::string::npos);
}

// Each roofline point has its workload kind's marker, named in a legend, and each ceiling its
// backend, dtype and peak.
TEST(HtmlPage, TheRooflineNamesItsMarkersAndCeilings) {
  nlohmann::json base = read_report(std::string(TRAINBENCH_TEST_DATA) + "/baseline.json");
  for (nlohmann::json& result : base["results"])  // the bytes each moved: a point on the roofline
    if (result["metrics"].contains("flops")) result["metrics"]["bytes"] = 1e8;
  const std::string page = render_html({{"baseline.json", base}});
  EXPECT_NE(page.find("markers: <span class=\"key\">&#9632; conv</span><span "
                      "class=\"key\">&#9679; gemm</span>"),
            std::string::npos);
  EXPECT_NE(page.find(R"(<circle cx=)"), std::string::npos);
  EXPECT_NE(page.find(R"(<rect x=)"), std::string::npos);
  EXPECT_NE(page.find(">baseline.json: cpu-onednn f32 480 GFLOP/s</text>"), std::string::npos);
}

// Bars: with one report, each case's percent of the peaks; with several, the ratio to the first
// report and whether the samples tell them apart; a case on one side only and a flagged figure
// say so.
TEST(HtmlPage, BarsSayWhatTheirLengthMeans) {
  nlohmann::json base = read_report(std::string(TRAINBENCH_TEST_DATA) + "/baseline.json");
  const nlohmann::json other =
      read_report(std::string(TRAINBENCH_TEST_DATA) + "/other_machine.json");
  EXPECT_NE(render_html({{"base.json", base}}).find(">0.359 TFLOP/s, 50.0% of the measured peak<"),
            std::string::npos);
  const std::string two = render_html({{"base.json", base}, {"other.json", other}});
  EXPECT_NE(two.find(">0.7173 TFLOP/s, 2.00x vs base.json<"), std::string::npos);
  EXPECT_NE(two.find("dir=fwd dtype=f32 [f32] (TFLOP/s) (only in base.json)<"), std::string::npos);
  // The same samples twice: a ratio of 1 that the samples cannot tell from noise.
  EXPECT_NE(render_html({{"base.json", base}, {"again.json", base}})
                .find(">0.359 TFLOP/s, 1.00x vs base.json [inconclusive: within noise]<"),
            std::string::npos);
  base["results"][0]["metrics"]["above_measured_peak"] = true;
  base["results"][0]["metrics"]["percent_of_peak"] = 104.0;
  const std::string flagged = render_html({{"base.json", base}});
  EXPECT_NE(flagged.find(R"(class="mark flagged")"), std::string::npos);
  EXPECT_NE(flagged.find("[above the measured peak: 104.0%]<"), std::string::npos);
}

// Each training step with a per-layer breakdown gets a stacked bar of its time by layer kind,
// forward and backward, and the optimizer, against its measured step; its slowest layers follow.
TEST(HtmlPage, EachStepShowsWhereItsTimeGoes) {
  nlohmann::json report = read_report(std::string(TRAINBENCH_TEST_DATA) + "/baseline.json");
  EXPECT_NE(render_html({{"base.json", report}})
                .find("No training step with a per-layer breakdown in these reports."),
            std::string::npos);
  const auto layer = [](const char* name, const char* kind, double forward, double backward) {
    return nlohmann::json{{"layer", name},
                          {"kind", kind},
                          {"forward_s", forward},
                          {"backward_s", backward},
                          {"spread_s", 0.01}};
  };
  nlohmann::json& step = report["results"][0];
  step["details"] = {{"breakdown",
                      {{"total_s", 1.0},
                       {"optimizer_s", 0.1},
                       {"layers",
                        {layer("conv1", "conv", 0.2, 0.4), layer("conv2", "conv", 0.05, 0.1),
                         layer("bn1", "batch_norm", 0.05, 0.1)}}}}};
  const std::string page = render_html({{"base.json", report}});
  EXPECT_NE(page.find("<h3>base.json: cpu-onednn gemm m=1024"), std::string::npos);
  EXPECT_NE(page.find("<title>conv forward: 250.00 ms (25.0% of the step)</title>"),
            std::string::npos);
  EXPECT_NE(page.find("<title>conv backward: 500.00 ms (50.0% of the step)</title>"),
            std::string::npos);
  EXPECT_NE(page.find("<title>batch_norm backward: 100.00 ms (10.0% of the step)</title>"),
            std::string::npos);
  EXPECT_NE(page.find("<title>optimizer: 100.00 ms (10.0% of the step)</title>"),
            std::string::npos);
  EXPECT_NE(page.find("instrumented 1000.0 ms; measured step 6.0 ms (median)"), std::string::npos);
  EXPECT_NE(page.find("slowest layer conv1 beyond the noise"), std::string::npos);
}

// Time-to-train curves: the target drawn, a run that missed it dashed and crossed.
TEST(HtmlPage, ConvergenceCurvesShowTheTargetAndMissedRuns) {
  nlohmann::json report = read_report(std::string(TRAINBENCH_TEST_DATA) + "/baseline.json");
  const auto run = [](bool converged, double last) {
    return nlohmann::json{{"seed", converged ? 1 : 2},
                          {"converged", converged},
                          {"curve",
                           {{{"time_s", 10.0}, {"quality", 0.5}, {"epoch", 0.5}},
                            {{"time_s", 20.0}, {"quality", last}, {"epoch", 1.0}}}}};
  };
  report["results"][0]["details"] = {
      {"target", 0.9}, {"quality", "test accuracy"}, {"runs", {run(true, 0.91), run(false, 0.8)}}};
  const std::string page = render_html({{"base.json", report}});
  EXPECT_NE(page.find(">target: test accuracy 0.9</text>"), std::string::npos);
  const std::string chart = page.substr(page.find("id=\"curves\""));
  std::size_t dashed = 0;
  for (std::size_t at = chart.find("stroke-dasharray=\"6,3\""); at != std::string::npos;
       at = chart.find("stroke-dasharray=\"6,3\"", at + 1))
    ++dashed;
  EXPECT_EQ(dashed, 1u);  // the missed run's line
  EXPECT_NE(page.find("(seed 2, missed the target)</title></text>"), std::string::npos);
  EXPECT_EQ(page.find("(seed 1, missed"), std::string::npos);
}

// History: one chart per case over its runs, a significantly slower run marked red and said so;
// no history, no section.
TEST(HtmlPage, HistoryMarksTheRunsThatGotSlower) {
  TrendSeries series{"gemm m=64", "f32", "cpu-onednn", {}};
  for (const auto& [date, median, change] : {std::tuple{"2026-10-20", 0.010, ""},
                                             {"2026-10-21", 0.0101, ""},
                                             {"2026-10-22", 0.015, "slower"}})
    series.points.push_back({date, "abcdef1234567890", median, {median}, change});
  const std::string page = render_html({}, {series});
  EXPECT_NE(page.find("<h2 id=\"history\">History</h2>"), std::string::npos);
  EXPECT_NE(page.find("<h3>gemm m=64 [f32] on cpu-onednn</h3>"), std::string::npos);
  EXPECT_NE(page.find(R"(fill="#d62728"><title>2026-10-22 abcdef123456: median 15 ms, slower than )"
                      "the run before (significant)</title>"),
            std::string::npos);
  EXPECT_EQ(page.find("<h2>Roofline</h2>"), std::string::npos);  // no reports given
  const nlohmann::json base = read_report(std::string(TRAINBENCH_TEST_DATA) + "/baseline.json");
  EXPECT_EQ(render_html({{"base.json", base}}).find("id=\"history\""), std::string::npos);
}

}  // namespace
}  // namespace tb
