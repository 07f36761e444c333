// The trainbench binary on good and bad input: exit codes, one-line errors, reports kept.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "reports/report.h"
#include "tests/cli/cli_fixture.h"

namespace tb {
namespace {

TEST_F(Cli, HelpOnEverySubcommand) {
  for (const char* command : {"list", "info", "run"}) {
    const Outcome outcome = run({command, "--help"}, false);
    EXPECT_EQ(outcome.exit_code, 0) << command;
    EXPECT_NE(outcome.out.find("Usage"), std::string::npos) << command;
  }
  EXPECT_EQ(run({"--help"}, false).exit_code, 0);
}

TEST_F(Cli, ListShowsWorkloadsSuitesAndBackends) {
  const Outcome outcome = run({"list"});
  EXPECT_EQ(outcome.exit_code, 0);
  for (const char* expected : {"gemm", "conv", "stream", "peak", "quick", "resnet50", "cpu-onednn"})
    EXPECT_NE(outcome.out.find(expected), std::string::npos) << expected;
  // Every kind, in the binary itself: a kind whose object the linker left out would be missing.
  for (const char* kind :
       {"peak", "stream", "transfer", "gemm", "conv", "resnet50-train", "bert-train",
        "ttt-fashion-mnist", "ttt-mlm", "allreduce", "reduce_scatter", "allgather", "broadcast"})
    EXPECT_NE(outcome.out.find(fmt::format("\n  {} ", kind)), std::string::npos) << kind;
}

TEST_F(Cli, InfoShowsHostAndPeaks) {
  const Outcome outcome = run({"info", "--json"});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json info = nlohmann::json::parse(outcome.out);
  EXPECT_FALSE(info["host"]["cpu_model"].get<std::string>().empty());
  ASSERT_FALSE(info["backends"].empty());
  EXPECT_GT(info["backends"][0]["peaks"]["f32"]["measured_gflops"].get<double>(), 0);
}

TEST_F(Cli, OmpPlacesDoNotShrinkTheThreadCount) {
  // libgomp binds the main thread to the first place before main(): the default thread count
  // must still be one per core.
  const auto threads = [](const Outcome& outcome) {
    return nlohmann::json::parse(outcome.out)["backends"][0]["device"]["threads_used"].get<int>();
  };
  const Outcome plain = run({"info", "--json"});
  const Outcome placed =
      run({"info", "--json"}, false, {{"OMP_PROC_BIND", "close"}, {"OMP_PLACES", "cores"}});
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  EXPECT_EQ(threads(placed), threads(plain));
}

TEST_F(Cli, EveryCpuBackendGetsEveryCore) {
  // Pinning one backend's threads must not shrink the CPUs the next backend sees.
  const Outcome outcome = run({"info", "--json"});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json info = nlohmann::json::parse(outcome.out);
  const int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  for (const auto& backend : info["backends"]) {
    if (!backend.contains("device") || backend["device"]["kind"] != "cpu") continue;
    EXPECT_EQ(backend["device"]["threads_used"].get<int>(), backend["device"]["cores"].get<int>())
        << backend["name"] << " on " << cores << " logical CPUs";
  }
}

TEST_F(Cli, ChildEnvironmentRunsAreMergedAndLabelled) {
  const Outcome outcome =
      run({"run", "-b", "cpu-onednn", "-w", "gemm m=16", "--child-env",
           "cpu-onednn:TRAINBENCH_TEST_MARK=7,-OMP_WAIT_POLICY", "-o", report_path()},
          true, {{"OMP_WAIT_POLICY", "passive"}});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json report = read_report(report_path());
  ASSERT_EQ(report["results"].size(), 2u);
  const std::string label = "cpu-onednn[TRAINBENCH_TEST_MARK=7,-OMP_WAIT_POLICY]";
  EXPECT_EQ(report["results"][0]["backend"], "cpu-onednn");
  EXPECT_EQ(report["results"][1]["backend"], label);
  EXPECT_EQ(report["results"][1]["status"], "passed");
  ASSERT_EQ(report["backends"].size(), 2u);
  const auto& child = report["backends"][1];
  EXPECT_EQ(child["name"], label);
  EXPECT_EQ(child["variant_of"], "cpu-onednn");
  EXPECT_FALSE(child["environment"].contains("OMP_WAIT_POLICY"));  // unset in the child
  EXPECT_EQ(report["host"]["environment"]["OMP_WAIT_POLICY"], "passive");
  EXPECT_EQ(child["device"]["threads_used"], report["backends"][0]["device"]["threads_used"]);
  for (const auto& entry :
       fs::directory_iterator(dir_))  // the child's report is merged, then removed
    EXPECT_EQ(entry.path().filename().string().find(".child."), std::string::npos) << entry.path();
}

TEST_F(Cli, OpenBlasCoreTypeTakesEffectInTheChild) {
  if (run({"list"}).out.find("cpu-openblas") == std::string::npos)
    GTEST_SKIP() << "no cpu-openblas in this build";
  const Outcome outcome = run({"run", "-b", "cpu-openblas", "-w", "gemm m=16", "--child-env",
                               "cpu-openblas:OPENBLAS_CORETYPE=Haswell", "-o", report_path()});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json report = read_report(report_path());
  EXPECT_EQ(report["backends"][1]["device"]["details"]["openblas_corename"], "Haswell");
  EXPECT_NE(report["results"][1]["implementation"].get<std::string>().find("Haswell"),
            std::string::npos);
}

TEST_F(Cli, ParseErrorsExitTwo) {
  expect_usage_error({"run", "--no-such-flag"}, "no-such-flag");
  expect_usage_error({"run", "--threads", "many"}, "threads");
  expect_usage_error({"run", "--suite", "nosuch"}, "nosuch");
  expect_usage_error({"frobnicate"}, "subcommand");
}

TEST_F(Cli, BadInputExitsTwoBeforeRunning) {
  expect_usage_error({"run", "-b", "cpu-nosuch", "-w", "gemm m=8"}, "unknown backend 'cpu-nosuch'");
  expect_usage_error({"run", "-w", "matmul m=8"}, "unknown workload 'matmul'");
  expect_usage_error({"run", "-w", "gemm m=8 dtype=f77"}, "bad value 'f77' for 'dtype'");
  expect_usage_error({"run", "-w", "gemm m"}, "malformed token 'm'");
  expect_usage_error({"run", "-w", "gemm m=8 volume=11"}, "unknown key 'volume'");
  expect_usage_error({"run", "-w", "gemm m=8", "-w", "conv ic=3"}, "needs ih=");
  expect_usage_error({"run", "-w", "gemm m=8", "--format", "xml"}, "xml");
  expect_usage_error({"run", "-w", "gemm m=8", "--child-env", "cpu-nosuch:A=1"},
                     "unknown backend 'cpu-nosuch'");
  expect_usage_error({"run", "-w", "gemm m=8", "--child-env", "cpu-onednn"}, "BACKEND:NAME=VALUE");
  expect_usage_error({"run", "-w", "gemm m=8", "--child-env", "cpu-onednn:A=1,B"},
                     "'B' is neither");
}

// --runs repeats a time-to-train case; runs that miss the target are reported as such, with
// their curves, not as times.
TEST_F(Cli, TimeToTrainRunsAreRepeatedAndUnconvergedRunsKept) {
  const Outcome outcome =
      run({"run", "-b", "cpu-onednn", "-w", "ttt-fashion-mnist target=0.99 subset=256 epochs=1",
           "--runs", "2", "-o", report_path()},
          false);
  EXPECT_EQ(outcome.exit_code, 1) << outcome.err;
  const nlohmann::json result = read_report(report_path())["results"][0];
  EXPECT_EQ(result["workload"],
            "ttt-fashion-mnist target=0.99 batch=128 dtype=f32 epochs=1 lr=0.1 runs=2 subset=256");
  EXPECT_EQ(result["status"], "failed");
  EXPECT_EQ(result["reason_code"], "target_missed");
  EXPECT_NE(result["reason"].get<std::string>().find("2 of 2 runs missed test accuracy 99%"),
            std::string::npos)
      << result["reason"];
  EXPECT_EQ(result["details"]["runs_attempted"], 2);
  EXPECT_EQ(result["details"]["runs_converged"], 0);
  EXPECT_EQ(result["details"]["runs_missed"], 2);
  EXPECT_EQ(result["details"]["runs"][1]["curve"].size(), 2u);  // every half epoch
  EXPECT_FALSE(result["details"].contains("time_to_train_s"));
  // The HTML report draws each run's curve.
  const std::string html = (dir_ / "ttt.html").string();
  const Outcome page = run({"report", "--html", html, report_path()});
  ASSERT_EQ(page.exit_code, 0) << page.err;
  const std::string text = slurp(html);
  EXPECT_NE(text.find("id=\"curves\""), std::string::npos);
  std::size_t lines = 0;
  for (std::size_t at = text.find("<polyline"); at != std::string::npos;
       at = text.find("<polyline", at + 1))
    lines += text.find("missed the target", at) < text.find("</polyline>", at);
  EXPECT_EQ(lines, 2u);
}

// Every network op gets an optimized oneDNN kernel (and our own kernels their vector variant)
// whatever the CPU: the machines trainbench compares are emulated here by capping oneDNN's
// dispatcher and our own. A case that would run a reference kernel is left untimed and names
// it, so a reference kernel anywhere shows as an "unimplemented ... reference kernels" result.
struct IsaCap {
  const char* onednn;      // ONEDNN_MAX_CPU_ISA ("" = the host's own)
  const char* trainbench;  // TRAINBENCH_MAX_ISA
};

class CliAtIsa : public Cli, public testing::WithParamInterface<IsaCap> {};

TEST_P(CliAtIsa, NetworksRunOptimizedKernelsOnly) {
  const IsaCap cap = GetParam();
  const Outcome info =
      run({"info", "--json"}, false,
          {{"ONEDNN_MAX_CPU_ISA", cap.onednn}, {"TRAINBENCH_MAX_ISA", cap.trainbench}});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  std::string onednn_isa, onednn_bf16;
  const nlohmann::json devices = nlohmann::json::parse(info.out);
  for (const nlohmann::json& backend : devices["backends"])
    if (backend["name"] == "cpu-onednn") {
      onednn_isa = backend["device"]["details"]["onednn_max_cpu_isa"].get<std::string>();
      onednn_bf16 = backend["device"]["details"]["onednn_bf16"].get<std::string>();
    }
  if (std::string(cap.onednn) == "AVX512_CORE" && !onednn_isa.starts_with("avx512_core"))
    GTEST_SKIP() << "this CPU lacks AVX-512 (oneDNN runs " << onednn_isa
                 << "): it cannot be capped up to avx512_core";
  const std::vector<std::string> cases = {
      "resnet50-train batch=2 image=64 classes=10",
      "resnet50-train batch=2 image=64 classes=10 dtype=bf16",
      "bert-train model=tiny batch=2 seq=32",
      "bert-train model=tiny batch=2 seq=32 dtype=bf16",
      "ttt-fashion-mnist target=0.99 subset=256 epochs=1",
      "ttt-mlm target=0.9 layers=1 hidden=64 vocab=1024 subset=256 epochs=1"};
  std::vector<std::string> args = {"run", "-b",         "cpu-onednn", "--min-reps",
                                   "1",   "--max-reps", "2",          "--warmup",
                                   "0",   "-o",         report_path()};
  for (const std::string& c : cases) args.insert(args.end(), {"-w", c});
  const Outcome outcome = run(
      args, false, {{"ONEDNN_MAX_CPU_ISA", cap.onednn}, {"TRAINBENCH_MAX_ISA", cap.trainbench}});
  const nlohmann::json report = read_report(report_path());
  ASSERT_EQ(report["results"].size(), cases.size()) << outcome.err;
  const bool bf16_runs = !onednn_bf16.starts_with("unavailable");
  // Marked where it does not run on the type's own instructions (avx512_core without
  // AVX512_BF16: the cap to AVX512_CORE on a CPU that has it).
  const bool bf16_emulated =
      onednn_bf16.starts_with("emulated") || onednn_bf16.starts_with("converted");
  if (std::string(cap.onednn) == "AVX512_CORE") {
    EXPECT_TRUE(bf16_emulated) << onednn_bf16;
  }
  for (const nlohmann::json& result : report["results"]) {
    const std::string what =
        result["workload"].get<std::string>() + ": " + result["reason"].get<std::string>();
    EXPECT_FALSE(result.contains("reference_kernels")) << what << "\n" << result.dump();
    const bool bf16 = result["dtype"] == "bf16";
    if (bf16 && !bf16_runs) {  // said plainly, with the ISA
      EXPECT_EQ(result["status"], "unimplemented") << what;
#if defined(__aarch64__)
      const char* why = "has no bf16 kernels on AArch64";
#else
      const char* why = "runs bf16 from avx512_core (emulated)";
#endif
      EXPECT_NE(result["reason"].get<std::string>().find(why), std::string::npos) << what;
      continue;
    }
    // ttt-fashion-mnist at 99% after one epoch fails honestly; it ran.
    if (result["workload"].get<std::string>().starts_with("ttt-")) {
      EXPECT_NE(result["status"], "unimplemented") << what;
      continue;
    }
    EXPECT_EQ(result["status"], "passed") << what;
    if (bf16) {
      EXPECT_EQ(result.value("bf16_emulated", false), bf16_emulated) << what << ": " << onednn_bf16;
    }
    // Every stage's seconds, the checks' own among them.
    for (const char* stage : {"setup", "validation", "breakdown", "warmup", "timing"})
      EXPECT_GE(result["stage_seconds"].value(stage, -1.0), 0.0) << what << ": " << stage;
    EXPECT_GT(result["stage_seconds"]["validation"].get<double>(), 0) << what;
    EXPECT_EQ(result["details"]["small_batch_check"]["batch"], 2) << what;
    // Every layer with products stands next to the same ops timed alone.
    const nlohmann::json& breakdown = result["details"]["breakdown"];
    EXPECT_FALSE(breakdown["layer_ceilings"].contains("error")) << what;
    EXPECT_FALSE(breakdown["layer_ceilings"]["furthest"].empty()) << what;
    int product_layers = 0;
    for (const nlohmann::json& layer : breakdown["layers"])
      if (layer.contains("product_flops")) {
        ++product_layers;
        EXPECT_GT(layer["alone_gflops"].get<double>(), 0) << what << ": " << layer.dump();
      }
    EXPECT_GT(product_layers, 0) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(OneDnnIsas, CliAtIsa,
                         testing::Values(IsaCap{"AVX2", "avx2"}, IsaCap{"AVX512_CORE", "avx512"},
                                         IsaCap{"", ""}),
                         [](const testing::TestParamInfo<IsaCap>& info) {
                           const std::string name = info.param.onednn;
                           return name.empty() ? std::string("HostIsa") : name;
                         });

TEST_F(Cli, UnwritableOutputExitsTwo) {
  const Outcome outcome =
      run({"run", "-w", "gemm m=8", "-o", (dir_ / "missing/dir/r.json").string()});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_NE(outcome.err.find("cannot write"), std::string::npos) << outcome.err;
}

TEST_F(Cli, RunWritesAValidReportAndTable) {
  const Outcome outcome = run({"run", "-b", "cpu-onednn", "-w", "gemm m=33 n=7 k=100 ta=t", "-w",
                               "conv shapes=resnet50 mb=1 dir=bwd_data", "-o", report_path()});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json report = read_report(report_path());
  ASSERT_EQ(report["results"].size(), 25u);
  for (const auto& result : report["results"]) {
    EXPECT_EQ(result["status"], "passed") << result.dump();
    EXPECT_GE(result["samples_s"].size(), 2u);
    EXPECT_TRUE(result["validation"]["passed"].get<bool>());
  }
  EXPECT_FALSE(report["finished_at"].is_null());
  EXPECT_EQ(report["backends"][0]["name"], "cpu-onednn");
  EXPECT_NE(outcome.out.find("gemm m=33 n=7 k=100"), std::string::npos);  // the table
  EXPECT_NE(outcome.err.find("[25/25]"), std::string::npos);              // the progress line
  // The progress line splits the time so far by stage; no stage lines without -v.
  EXPECT_NE(outcome.err.find("elapsed (setup "), std::string::npos) << outcome.err;
  EXPECT_EQ(outcome.out.find("^ stages:"), std::string::npos) << outcome.out;
}

// -v puts each case's stage seconds under its row; the report has them whatever the flag.
TEST_F(Cli, VerboseRunsPrintEachCasesStages) {
  const Outcome outcome =
      run({"run", "-v", "-b", "cpu-onednn", "-w", "gemm m=64", "-o", report_path()});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const std::size_t line = outcome.out.find("^ stages: setup ");
  ASSERT_NE(line, std::string::npos) << outcome.out;
  std::size_t at = line;
  for (const char* stage : {" s, validation ", " s, breakdown ", " s, warmup ", " s, timing "}) {
    at = outcome.out.find(stage, at);
    ASSERT_NE(at, std::string::npos) << stage << " in " << outcome.out;
  }
  const nlohmann::json stages = read_report(report_path())["results"][0]["stage_seconds"];
  EXPECT_EQ(stages.size(), 5u) << stages.dump();
}

// A collective started without a launcher runs at world size 1, a trivial collective (a copy),
// and says so in its result; a size that is no whole number of elements is a usage error.
TEST_F(Cli, CollectiveWithoutALauncherRunsAtWorldSizeOneAndSaysSo) {
  expect_usage_error({"run", "-w", "allreduce bytes=6"}, "not a whole number of f32 elements");
  const Outcome outcome = run({"run", "-b", "cpu-onednn", "-w", "allreduce sizes=8:64:x2", "-w",
                               "reduce_scatter bytes=12 dtype=f16 inplace=1", "-o", report_path()});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json report = read_report(report_path());
  ASSERT_EQ(report["results"].size(), 5u);
  for (const auto& result : report["results"]) {
    ASSERT_EQ(result["status"], "passed") << result.dump();
    EXPECT_EQ(result["details"]["world_size"], 1);
    EXPECT_NE(result["implementation"].get<std::string>().find("world size 1: a trivial"),
              std::string::npos)
        << result["implementation"];
    EXPECT_GT(result["metrics"]["algbw_gbps"].get<double>(), 0);
    EXPECT_EQ(result["metrics"]["busbw_gbps"].get<double>(), 0);  // nothing crosses a link
    EXPECT_EQ(result["headline"]["metric"], "busbw_gbps");
  }
  EXPECT_EQ(report["results"][0]["workload"], "allreduce bytes=8 dtype=f32 inplace=0");
}

TEST_F(Cli, FlushCachesIsRecorded) {
  ASSERT_EQ(
      run({"run", "-b", "cpu-onednn", "-w", "gemm m=64", "--flush-caches", "-o", report_path()})
          .exit_code,
      0);
  const nlohmann::json report = read_report(report_path());
  EXPECT_TRUE(report["settings"]["flush_caches"].get<bool>());
  EXPECT_EQ(report["results"][0]["units_per_sample"], 1);
}

TEST_F(Cli, GbenchFormatIsGoogleBenchmarkJson) {
  ASSERT_EQ(run({"run", "-w", "gemm m=16", "--format", "gbench", "-o", report_path()}).exit_code,
            0);
  const nlohmann::json gbench = nlohmann::json::parse(slurp(report_path()));
  EXPECT_TRUE(gbench.contains("context"));
  EXPECT_FALSE(gbench["benchmarks"].empty());
}

// Not enough memory is this machine's limit, not a fault: the case is skipped with its code and
// the run goes on and exits 0.
TEST_F(Cli, TooLargeACaseIsSkippedAloneWithItsReasonCode) {
  const Outcome outcome = run({"run", "-b", "cpu-onednn", "-w", "gemm m=8", "-w", "gemm m=300000",
                               "-w", "stream op=copy n=1000", "-o", report_path()});
  EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json report = read_report(report_path());
  ASSERT_EQ(report["results"].size(), 3u);
  EXPECT_EQ(report["results"][0]["status"], "passed");
  EXPECT_EQ(report["results"][0]["reason_code"], "none");
  EXPECT_EQ(report["results"][1]["status"], "skipped");
  EXPECT_EQ(report["results"][1]["reason_code"], "not_enough_memory");
  EXPECT_NE(report["results"][1]["reason"].get<std::string>().find("does not fit in memory"),
            std::string::npos);
  EXPECT_EQ(report["results"][2]["status"], "passed");
}

TEST_F(Cli, UnimplementedCaseIsRecordedNotFailed) {
  const Outcome outcome = run({"run", "-w", "gemm m=8 dtype=f8_e4m3", "-o", report_path()});
  EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json result = read_report(report_path())["results"][0];
  EXPECT_EQ(result["status"], "unimplemented");
  const std::string code = result["reason_code"];
  EXPECT_TRUE(code == "dtype_unsupported" || code == "isa_lacking") << code;
}

TEST_F(Cli, UnusableBackendSkipsItsCasesAndExitsOne) {
  const Outcome listed = run({"list"});
  if (listed.out.find("unusable") == std::string::npos)
    GTEST_SKIP() << "every backend in this build is usable here";
  const auto start = listed.out.find("backends in this build:");
  std::istringstream lines(listed.out.substr(start));
  std::string line, name, state;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    if (words >> name >> state && state == "unusable") break;
  }
  const Outcome outcome =
      run({"run", "-b", "cpu-onednn," + name, "-w", "gemm m=8", "-o", report_path()});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_NE(outcome.err.find("backend " + name + " is not usable here"), std::string::npos)
      << outcome.err;
  const nlohmann::json report = read_report(report_path());
  ASSERT_EQ(report["results"].size(), 2u);
  EXPECT_EQ(report["results"][0]["status"], "passed");
  EXPECT_EQ(report["results"][1]["status"], "skipped");
  EXPECT_FALSE(report["backends"][1]["available"].get<bool>());
}

std::string data(const std::string& name) {
  return std::string(TRAINBENCH_TEST_DATA) + "/" + name;
}

TEST_F(Cli, CompareInEveryFormat) {
  const Outcome csv =
      run({"compare", data("baseline.json"), data("current_same.json"), "--format", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 4) << csv.out;  // header + 3 cases
  EXPECT_EQ(
      csv.out.rfind("workload,dtype,backend,baseline.json,current_same.json,vs baseline.json", 0),
      0u)
      << csv.out;

  const Outcome json = run({"compare", data("baseline.json"), data("current_regressed.json"),
                            "--format", "json", "--price-per-hour", "2,4", "--watts", "300,600"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json out = nlohmann::json::parse(json.out);
  ASSERT_EQ(out["reports"].size(), 2u);
  const auto& headline = out["reports"][0]["headline"];
  ASSERT_FALSE(headline.empty());
  EXPECT_TRUE(headline[0].contains("per_usd_per_hour"));
  EXPECT_TRUE(headline[0].contains("per_watt"));
  bool saw_slower = false;
  for (const auto& entry : out["cases"])
    for (const auto& column : entry["columns"])
      if (column.contains("versus_first") && column["versus_first"]["verdict"] == "slower")
        saw_slower = true;
  EXPECT_TRUE(saw_slower);

  const Outcome markdown =
      run({"compare", data("baseline.json"), "--across-backends", "--format", "markdown"});
  ASSERT_EQ(markdown.exit_code, 0) << markdown.err;
  EXPECT_NE(markdown.out.find("| workload | dtype |"), std::string::npos) << markdown.out;
}

TEST_F(Cli, CompareBadInput) {
  EXPECT_EQ(run({"compare", data("baseline.json")}).exit_code, 2);
  EXPECT_EQ(
      run({"compare", data("baseline.json"), data("current_same.json"), "--price-per-hour", "1"})
          .exit_code,
      2);
  std::ofstream(dir_ / "truncated.json") << slurp(data("baseline.json")).substr(0, 500);
  const Outcome corrupt =
      run({"compare", data("baseline.json"), (dir_ / "truncated.json").string()});
  EXPECT_EQ(corrupt.exit_code, 2);
  EXPECT_NE(corrupt.err.find("truncated.json"), std::string::npos) << corrupt.err;
  nlohmann::json future = nlohmann::json::parse(slurp(data("baseline.json")));
  future["schema_version"] = 2;
  std::ofstream(dir_ / "future.json") << future.dump();
  const Outcome version = run(
      {"check", "--baseline", data("baseline.json"), "--current", (dir_ / "future.json").string()});
  EXPECT_EQ(version.exit_code, 2);
  EXPECT_NE(version.err.find("schema version 2"), std::string::npos) << version.err;
}

TEST_F(Cli, CheckGatesOnSignificantSlowdowns) {
  const std::string before = slurp(data("baseline.json"));
  const Outcome same =
      run({"check", "--baseline", data("baseline.json"), "--current", data("current_same.json")});
  EXPECT_EQ(same.exit_code, 0) << same.out;
  const Outcome regressed = run({"check", "--baseline", data("baseline.json"), "--current",
                                 data("current_regressed.json"), "--threshold", "5%"});
  EXPECT_EQ(regressed.exit_code, 1);
  for (const char* section :
       {"regressions:", "improvements:", "new:", "lost: measured before, not now:", "check FAILED",
        "significance not tested: 1 baseline run"})
    EXPECT_NE(regressed.out.find(section), std::string::npos) << section << "\n" << regressed.out;
  // Within the threshold, the lost conv case still fails the check, unless allowed.
  EXPECT_EQ(run({"check", "--baseline", data("baseline.json"), "--current",
                 data("current_regressed.json"), "--threshold", "0.15"})
                .exit_code,
            1);
  EXPECT_EQ(run({"check", "--baseline", data("baseline.json"), "--current",
                 data("current_regressed.json"), "--threshold", "0.15", "--allow-lost"})
                .exit_code,
            0);
  const Outcome failed =
      run({"check", "--baseline", data("baseline.json"), "--current", data("current_failed.json")});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_NE(failed.out.find("validation failed"), std::string::npos) << failed.out;
  // One run a side: the 50% slow-down fails on the threshold alone, whatever the sample count.
  EXPECT_EQ(run({"check", "--baseline", data("baseline_few_samples.json"), "--current",
                 data("current_few_samples.json")})
                .exit_code,
            1);
  // Several runs a side: each run's median is one observation.
  // Each run its own file (one file given twice would be one run counted twice).
  for (const auto& [copy, of] : {std::pair{"b2.json", "current_same.json"},
                                 {"b3.json", "baseline.json"},
                                 {"c2.json", "baseline.json"},
                                 {"c3.json", "current_same.json"}})
    fs::copy_file(data(of), dir_ / copy);
  const Outcome runs =
      run({"check", "--baseline", data("baseline.json"), "b2.json", "b3.json", "--current",
           data("current_same.json"), "c2.json", "--current", "c3.json", "--format", "json"});
  EXPECT_EQ(runs.exit_code, 0) << runs.out << runs.err;
  const nlohmann::json verdicts = nlohmann::json::parse(runs.out);
  EXPECT_EQ(verdicts["cases"][0]["comparison"]["baseline_runs"], 3);
  EXPECT_EQ(verdicts["cases"][0]["comparison"]["current_runs"], 3);
  EXPECT_EQ(verdicts["cases"][0]["comparison"]["significance_tested"], true);
  // Other conditions are named.
  nlohmann::json flushed = nlohmann::json::parse(slurp(data("current_same.json")));
  flushed["settings"]["flush_caches"] = true;
  std::ofstream(dir_ / "flushed.json") << flushed.dump();
  const Outcome conditions = run({"check", "--baseline", data("baseline.json"), "--current",
                                  (dir_ / "flushed.json").string()});
  EXPECT_EQ(conditions.exit_code, 2);
  EXPECT_NE(conditions.err.find("flush caches: off vs on"), std::string::npos) << conditions.err;
  const Outcome other = run(
      {"check", "--baseline", data("other_machine.json"), "--current", data("current_same.json")});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("--force"), std::string::npos) << other.err;
  EXPECT_NE(run({"check", "--baseline", data("other_machine.json"), "--current",
                 data("current_same.json"), "--force"})
                .exit_code,
            2);
  EXPECT_EQ(run({"check", "--baseline", data("baseline.json"), "--current",
                 data("current_same.json"), "--threshold", "fast"})
                .exit_code,
            2);
  EXPECT_EQ(slurp(data("baseline.json")), before);  // inputs are never written
}

// check takes its baseline runs from the history: the newest reports of this machine measured
// under the current run's conditions.
TEST_F(Cli, CheckTakesBaselinesFromTheHistory) {
  const std::string db = (dir_ / "h.db").string();
  nlohmann::json report = nlohmann::json::parse(slurp(data("baseline.json")));
  for (int i = 0; i < 3; ++i) {
    report["started_at"] = fmt::format("2026-10-2{}T12:00:00Z", i);
    std::ofstream(dir_ / fmt::format("run{}.json", i)) << report.dump();
  }
  nlohmann::json flushed = report;
  flushed["started_at"] = "2026-10-29T12:00:00Z";
  flushed["settings"]["flush_caches"] = true;  // other conditions: left out
  std::ofstream(dir_ / "flushed.json") << flushed.dump();
  ASSERT_EQ(run({"history", "--db", db, "add", (dir_ / "run0.json").string(),
                 (dir_ / "run1.json").string(), (dir_ / "run2.json").string(),
                 (dir_ / "flushed.json").string()})
                .exit_code,
            0);
  const Outcome check = run({"check", "--baseline-history", db, "--current",
                             data("current_same.json"), "--format", "json"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.err.find("3 baseline runs from"), std::string::npos) << check.err;
  EXPECT_NE(check.err.find("1 of other conditions left out"), std::string::npos) << check.err;
  EXPECT_EQ(nlohmann::json::parse(check.out)["cases"][0]["comparison"]["baseline_runs"], 3);
  const Outcome two = run({"check", "--baseline-history", db, "--history-runs", "2", "--current",
                           data("current_same.json"), "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(two.out)["cases"][0]["comparison"]["baseline_runs"], 2);
  EXPECT_EQ(run({"check", "--current", data("current_same.json")}).exit_code, 2);  // no baseline
  EXPECT_EQ(run({"check", "--baseline-history", (dir_ / "empty.db").string(), "--current",
                 data("current_same.json")})
                .exit_code,
            2);
}

TEST_F(Cli, SummaryAnswersWithItsSources) {
  const Outcome outcome = run({"summary", data("current_regressed.json"), "--format", "json"});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json answers = nlohmann::json::parse(outcome.out);
  ASSERT_EQ(answers.size(), 9u);
  for (const auto& answer : answers) EXPECT_FALSE(answer["answer"].get<std::string>().empty());
  EXPECT_EQ(answers[7]["answer"], "not measured: no case in this report read an energy counter");
  EXPECT_EQ(answers[8]["answer"].get<std::string>().rfind("not compared: one machine", 0), 0u);
  EXPECT_EQ(answers[0]["answer"], "not measured: no case ran on both a GPU and a CPU backend");
  EXPECT_EQ(answers[5]["answer"], "not measured: no model training step in this report");
  // No all-reduce sweep: says how to measure one, projects nothing.
  const std::string communication = answers[6]["answer"];
  EXPECT_EQ(communication.rfind("not measured: no all-reduce sweep in this report; measure one "
                                "with `mpirun -np 2 trainbench run",
                                0),
            0u)
      << communication;
  EXPECT_FALSE(answers[6].contains("projection"));
}

// Two machines' reports: the buyer's table last, each machine's price and power in report order,
// the last machine the baseline; a list of the wrong length or a report given twice is bad input.
TEST_F(Cli, SummaryOfTwoMachinesEndsWithTheBuyersTable) {
  const Outcome json = run({"summary", data("other_machine.json"), data("baseline.json"),
                            "--price-per-hour", "2,1", "--watts", "400,300", "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json answers = nlohmann::json::parse(json.out);
  ASSERT_EQ(answers.size(), 9u);
  const nlohmann::json& figures = answers[8]["figures"];
  EXPECT_EQ(figures["baseline"], "baseline.json");
  std::vector<nlohmann::json> gemm;  // GEMM: the one workload both ran
  for (const nlohmann::json& row : figures["rows"])
    if (row["workload"] == "gemm dtype=f32 (square)") gemm.push_back(row);
  ASSERT_EQ(gemm.size(), 2u) << figures.dump();
  EXPECT_EQ(gemm[0]["machine"], "other_machine.json");
  const double speed = gemm[0]["over_baseline"];
  EXPECT_NEAR(speed, 0.7173472240872836 / 0.359028635489369, 1e-3);
  EXPECT_NEAR(gemm[0]["usd_per_unit"].get<double>() / gemm[1]["usd_per_unit"].get<double>(),
              2 / speed, 1e-9);
  EXPECT_NEAR(gemm[0]["joules_per_unit"].get<double>() / gemm[1]["joules_per_unit"].get<double>(),
              400.0 / 300 / speed, 1e-9);
  EXPECT_EQ(gemm[1]["power"], "given 300 W");
  const Outcome table = run(
      {"summary", data("other_machine.json"), data("baseline.json"), "--price-per-hour", "2,1"});
  EXPECT_NE(table.out.find("per 1M TFLOPs"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("cpu-onednn on baseline.json"), std::string::npos) << table.out;
  const Outcome short_list =
      run({"summary", data("other_machine.json"), data("baseline.json"), "--price-per-hour", "2"});
  EXPECT_EQ(short_list.exit_code, 2);
  EXPECT_NE(short_list.err.find("one value per report"), std::string::npos) << short_list.err;
  const Outcome twice = run({"summary", data("baseline.json"), data("baseline.json")});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("is given twice"), std::string::npos) << twice.err;
}

// Reports of one host are one machine's, named by their folder: bench/results/ as it is, every
// machine this project has measured, read in one command.
TEST_F(Cli, SummaryOfTheResultsFolderReadsEveryMachine) {
  std::vector<std::string> arguments = {"summary", "--format", "json"};
  const std::filesystem::path results =
      std::filesystem::path(TRAINBENCH_SOURCE_DIR) / "bench/results";
  std::set<std::string> folders;
  for (const auto& machine : std::filesystem::directory_iterator(results))
    if (machine.is_directory()) {
      folders.insert(machine.path().filename().string());
      for (const auto& file : std::filesystem::directory_iterator(machine.path()))
        if (file.path().extension() == ".json") arguments.push_back(file.path().string());
    }
  // A costs file prices a machine by its folder: every report in it.
  const std::string costs = (dir_ / "costs.json").string();
  std::ofstream(costs) << R"({"h200": {"price_per_hour": 10, "watts": 700}})";
  arguments.insert(arguments.end(), {"--costs", costs});
  const Outcome outcome = run(arguments);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json table = nlohmann::json::parse(outcome.out).back()["figures"];
  std::set<std::string> labels;
  for (const nlohmann::json& machine : table["machines"]) {
    labels.insert(machine["label"]);
    if (machine["label"] == "h200") {
      EXPECT_EQ(machine["price_per_hour"], 10.0);
    }
  }
  EXPECT_EQ(labels, folders);
  EXPECT_FALSE(table["rows"].empty());
}

// The communication projection from a 2-rank all-reduce sweep (alpha 6 us, 8 GB/s): labelled a
// projection with its formula and assumptions; 10 B fp32 parameters over PCIe 4.0 x16 at 8
// ranks take 2 x 7/8 x 40 GB / 31.5 GB/s = 2.22 s.
TEST_F(Cli, SummaryProjectsGradientAllReduceFromTheMeasuredSweep) {
  const Outcome json = run({"summary", data("allreduce_sweep.json"), "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json answer = nlohmann::json::parse(json.out)[6];
  EXPECT_NE(answer["question"].get<std::string>().find("a projection"), std::string::npos);
  // Its bf16 all-reduces move the same bytes as the f32 ones: no mixed-precision speed-up.
  const std::string mixed = nlohmann::json::parse(json.out)[2]["answer"];
  EXPECT_EQ(mixed.find("allreduce"), std::string::npos) << mixed;
  const std::string text = answer["answer"];
  EXPECT_NE(text.find("fp32 2.22 s, bf16 1.11 s over PCIe 4.0 x16"), std::string::npos) << text;
  EXPECT_NE(text.find("holds in 4 of these 4 cases"), std::string::npos) << text;
  EXPECT_NE(text.find("alpha 6 us, beta 8 GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("ring all-reduce T(n, S) = 2(n-1) a + 2(n-1)/n S / B"), std::string::npos);
  EXPECT_NE(text.find("no congestion"), std::string::npos);
  const nlohmann::json& p = answer["projection"];
  EXPECT_EQ(p["label"], "projection");
  EXPECT_EQ(p["gradient_ranks"], 8);
  EXPECT_NEAR(p["gradients"][3]["seconds"]["PCIe 4.0 x16"].get<double>(), 1.75 * 40e9 / 31.5077e9,
              1e-3);
  ASSERT_EQ(p["data_parallel"].size(), 1u);
  EXPECT_NEAR(p["data_parallel"][0]["hidden_fraction"].get<double>(), 0.75, 1e-12);
  EXPECT_EQ(p["data_parallel"][0]["rows"].size(), 10u);  // 2 .. 1024 ranks
  EXPECT_EQ(p["data_parallel"][0]["rows"].back()["ranks"], 1024);
  // 2 ranks: 2 s step + 2 x 3 us + 102 MB of fp32 gradients / 8 GB/s, nothing hidden.
  const nlohmann::json& two = p["data_parallel"][0]["rows"][0];
  EXPECT_NEAR(two["no_overlap"]["step_s"].get<double>(), 2 + 6e-6 + 4 * 25557032 / 8e9, 1e-9);
  EXPECT_DOUBLE_EQ(two["full_overlap"]["step_s"].get<double>(), 2);
  EXPECT_NEAR(two["measured_overlap"]["step_s"].get<double>(),
              2 + 0.25 * two["all_reduce_s"].get<double>(), 1e-12);

  const Outcome table = run({"summary", data("allreduce_sweep.json")});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(
      table.out.find("10 B fp32                           40 GB   8.75 s               2.22 s"),
      std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("step, 75% hidden (measured)"), std::string::npos) << table.out;
  const Outcome markdown = run({"summary", data("allreduce_sweep.json"), "--format", "markdown"});
  EXPECT_NE(markdown.out.find("| 10 B fp32 | 40 GB | 8.75 s | 2.22 s |"), std::string::npos)
      << markdown.out;

  // Without the data-parallel result only the bounds remain.
  nlohmann::json report = nlohmann::json::parse(slurp(data("allreduce_sweep.json")));
  report["results"].erase(report["results"].size() - 1);
  const std::string path = (dir_ / "no_overlap_measured.json").string();
  std::ofstream(path) << report.dump();
  const Outcome bounds = run({"summary", path, "--format", "json"});
  ASSERT_EQ(bounds.exit_code, 0) << bounds.err;
  const nlohmann::json step =
      nlohmann::json::parse(bounds.out)[6]["projection"]["data_parallel"][0];
  EXPECT_TRUE(step["hidden_fraction"].is_null());
  EXPECT_FALSE(step["rows"][0].contains("measured_overlap"));
}

// Ratios compare the headline metric, never raw times: `peak dtype=bf16` runs twice the FLOPs
// of `peak dtype=f32` per unit, so a bf16 unit 1.07x as long is 1.86x the throughput (the
// report that read "bf16 0.93x").
TEST_F(Cli, SummaryRatiosCompareTheHeadlineNotTimes) {
  nlohmann::json report = nlohmann::json::parse(slurp(data("current_regressed.json")));
  nlohmann::json f32 = report["results"][0];
  f32["status"] = "passed";
  f32["workload"] = "peak dtype=f32";
  f32["dtype"] = "f32";
  f32["headline"] = {{"metric", "tflops"},
                     {"unit", "TFLOP/s"},
                     {"figure", "peak f32"},
                     {"lower_is_better", false}};
  f32["metrics"] = {{"tflops", 0.4}};
  f32["stats"]["median_s"] = 1.0;
  nlohmann::json bf16 = f32;
  bf16["workload"] = "peak dtype=bf16";
  bf16["dtype"] = "bf16";
  bf16["headline"]["figure"] = "peak bf16";
  bf16["metrics"] = {{"tflops", 0.744}};
  bf16["stats"]["median_s"] = 1.075;
  report["results"] = {f32, bf16};
  const std::string path = (dir_ / "peaks.json").string();
  std::ofstream(path) << report.dump();
  const Outcome outcome = run({"summary", path, "--format", "json"});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const std::string mixed = nlohmann::json::parse(outcome.out)[2]["answer"];
  EXPECT_NE(mixed.find("bf16 1.86x"), std::string::npos) << mixed;
  EXPECT_EQ(mixed.find("0.93x"), std::string::npos) << mixed;
}

// A layer is named the slowest only where it leads the next by more than their spreads over
// the instrumented steps; otherwise the leaders are said to be within noise.
TEST_F(Cli, SummaryShowsWhereAStepsTimeGoesAndNamesNoSlowestLayerWithinNoise) {
  // A passed case with a per-layer breakdown, as resnet50-train records it.
  nlohmann::json report = nlohmann::json::parse(slurp(data("current_regressed.json")));
  nlohmann::json step = report["results"][0];
  step["workload"] = "resnet50-train batch=4 image=112";
  step["status"] = "passed";
  auto layer = [](const char* name, const char* kind, double forward, double backward,
                  double spread) {
    return nlohmann::json{{"layer", name},
                          {"kind", kind},
                          {"forward_s", forward},
                          {"backward_s", backward},
                          {"spread_s", spread}};
  };
  step["details"] = {
      {"breakdown",
       {{"total_s", 1.0},
        {"optimizer_s", 0.02},
        {"layers",
         {layer("conv1", "conv", 0.25, 0.5, 0.02), layer("bn1", "batch_norm", 0.05, 0.1, 0.01),
          layer("layer1.0", "residual_join", 0.03, 0.05, 0.01)}},
        {"layer_ceilings",
         {{"furthest",
           {{{"layer", "conv1"},
             {"kind", "conv"},
             {"gflops", 120.0},
             {"alone_gflops", 300.0},
             {"step_rate_over_alone", 0.4},
             {"lost_s", 0.45}}}}}}}}};
  report["results"].push_back(step);
  // The same shares, but bn1 is within its spread of conv1 (the breakdown that named a 7x7
  // batch norm the slowest layer of ResNet-50 on one noisy step).
  step["details"]["breakdown"]["layers"][0] = layer("conv1", "conv", 0.05, 0.11, 0.01);
  step["details"]["breakdown"]["layers"][1] = layer("bn1", "batch_norm", 0.05, 0.1, 0.04);
  step["workload"] = "resnet50-train batch=8 image=112";  // a report holds each case once
  report["results"].push_back(step);
  const std::string path = (dir_ / "model.json").string();
  std::ofstream(path) << report.dump();
  const Outcome outcome = run({"summary", path, "--format", "json"});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const std::string answer = nlohmann::json::parse(outcome.out)[5]["answer"];
  EXPECT_NE(answer.find("conv 75%, batch_norm 15%, residual_join 8%"), std::string::npos) << answer;
  EXPECT_NE(answer.find("slowest layer conv1 beyond the noise; then conv1 750.0 ms (±10.0), "
                        "bn1 150.0 ms (±5.0), layer1.0 80.0 ms (±5.0)"),
            std::string::npos)
      << answer;
  EXPECT_NE(answer.find("furthest from its ceiling: conv1 at 120 GFLOP/s in the step, 300 alone "
                        "(450.0 ms lost)"),
            std::string::npos)
      << answer;
  EXPECT_NE(answer.find("no slowest layer beyond the noise"), std::string::npos) << answer;
  EXPECT_NE(answer.find("conv1 160.0 ms (±5.0), bn1 150.0 ms (±20.0)"), std::string::npos)
      << answer;
}

// Only full-size models project to MLPerf's full-scale time-to-train, labelled a projection
// with its assumptions.
TEST_F(Cli, SummaryProjectsFullScaleTimeToTrainWithItsAssumptions) {
  nlohmann::json report = nlohmann::json::parse(slurp(data("current_regressed.json")));
  nlohmann::json large = report["results"][0];
  large["workload"] =
      "bert-train model=large batch=1 seq=512 dtype=f32 optimizer=adamw dropout=0.1 lr=0.0001";
  large["status"] = "passed";
  large["metrics"]["samples_per_s"] = 10.0;
  nlohmann::json base = large;
  base["workload"] = "bert-train model=base batch=8 seq=128";
  report["results"].push_back(large);
  report["results"].push_back(base);
  const std::string path = (dir_ / "bert.json").string();
  std::ofstream(path) << report.dump();
  const Outcome outcome = run({"summary", path, "--format", "json"});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json projection = nlohmann::json::parse(outcome.out)[4];
  const std::string answer = projection["answer"];
  EXPECT_NE(projection["question"].get<std::string>().find("not a measurement"), std::string::npos);
  // (2.55 M + 170,000 / 3 evaluation samples) / 10 per second = 72.4 h.
  EXPECT_NE(answer.find("72.4 h"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Assumptions for BERT-large"), std::string::npos) << answer;
  EXPECT_EQ(projection["from"].size(), 1u);  // BERT-base does not project
}

// A descriptor reproduces its inputs wherever it stands in a suite: the same validation error
// alone and after another case.
TEST_F(Cli, ACaseSeedDoesNotDependOnItsPosition) {
  const std::string alone = (dir_ / "alone.json").string(),
                    second = (dir_ / "second.json").string();
  ASSERT_EQ(run({"run", "-b", "cpu-onednn", "-w", "gemm m=33 n=29 k=31", "-o", alone}).exit_code,
            0);
  ASSERT_EQ(
      run({"run", "-b", "cpu-onednn", "-w", "gemm m=17", "-w", "gemm m=33 n=29 k=31", "-o", second})
          .exit_code,
      0);
  const nlohmann::json first_run = read_report(alone)["results"][0],
                       later = read_report(second)["results"][1];
  ASSERT_EQ(first_run["workload"], later["workload"]);
  EXPECT_EQ(first_run["validation"]["error"], later["validation"]["error"]);
}

TEST_F(Cli, AbRunsBothBuildsAlternatingAbba) {
  const Outcome outcome =
      run({"ab", "--baseline-bin", TRAINBENCH_BINARY, "--current-bin", TRAINBENCH_BINARY,
           "--rounds", "5", "--out-dir", (dir_ / "ab").string(), "-b", "cpu-onednn", "-w",
           "gemm m=64", "--time-budget", "0", "--min-reps", "3", "--warmup-time", "0"},
          false);
  // The same binary: no regression (the gate decides on run-to-run noise, not on samples).
  ASSERT_EQ(outcome.exit_code, 0) << outcome.out << outcome.err;
  EXPECT_NE(outcome.out.find("check passed"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("5 vs 5 runs"), std::string::npos) << outcome.out;
  const nlohmann::json combined = read_report((dir_ / "ab" / "current-combined.json").string());
  EXPECT_EQ(combined["results"][0]["samples_s"].size(), 5u);  // one median per round
  const std::string order = outcome.err;
  EXPECT_LT(order.find("round 1/5, baseline"), order.find("round 1/5, current"));
  EXPECT_LT(order.find("round 1/5, current"), order.find("round 2/5, current"));
  EXPECT_LT(order.find("round 2/5, current"), order.find("round 2/5, baseline"));
  EXPECT_LT(order.find("round 2/5, baseline"), order.find("round 3/5, baseline"));
  EXPECT_EQ(run({"ab", "--baseline-bin", TRAINBENCH_BINARY, "--current-bin", TRAINBENCH_BINARY,
                 "--rounds", "2"},
                false)
                .exit_code,
            2);
  EXPECT_EQ(
      run({"ab", "--baseline-bin", "/no/such/binary", "--current-bin", TRAINBENCH_BINARY}, false)
          .exit_code,
      2);
}

// A library that dies of a fatal signal in one case of three ends that case, not the run: the
// case is failed with the signal, the function and library it died in and the backend's
// libraries; the cases before and after it pass, and the report keeps all three. The crash is
// a real integer division by zero in a preloaded cblas_sgemm, for the middle case's shape only.
TEST_F(Cli, ACaseThatCrashesFailsAndTheRunGoesOn) {
#ifndef TRAINBENCH_SLOWDOWN_SHIM
  GTEST_SKIP() << "no cpu-openblas backend in this build: no cblas_sgemm to plant a crash in";
#else
  const char* asan = std::getenv("ASAN_OPTIONS");
  const Outcome outcome =
      run({"run", "-b", "cpu-openblas", "-w", "gemm m=64", "-w", "gemm m=96", "-w", "gemm m=128",
           "--threads", "1", "-o", report_path()},
          true,
          {{"LD_PRELOAD", TRAINBENCH_SLOWDOWN_SHIM},
           {"TRAINBENCH_SLOWDOWN", "0"},
           {"TRAINBENCH_CRASH_MNK", "96,96,96"},
           // The preloaded shim comes before ASan's runtime, which ASan otherwise refuses.
           {"ASAN_OPTIONS", fmt::format("verify_asan_link_order=0:{}", asan ? asan : "")}});
  EXPECT_EQ(outcome.exit_code, 1) << outcome.err;
  EXPECT_NE(outcome.err.find("case 2 (gemm"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("died of SIGFPE"), std::string::npos) << outcome.err;
  const nlohmann::json report = read_report(report_path());
  ASSERT_EQ(report["results"].size(), 3u) << report["results"].dump(2);
  EXPECT_EQ(report["results"][0]["status"], "passed") << report["results"][0].dump(2);
  EXPECT_EQ(report["results"][2]["status"], "passed") << report["results"][2].dump(2);
  const nlohmann::json& crashed = report["results"][1];
  EXPECT_EQ(crashed["status"], "failed");
  EXPECT_EQ(crashed["workload"].get<std::string>().rfind("gemm m=96", 0), 0u);
  const std::string reason = crashed["reason"];
  for (const char* named : {"SIGFPE", "cblas_sgemm", "libslowdown_shim", "OpenBLAS"})
    EXPECT_NE(reason.find(named), std::string::npos) << named << " in: " << reason;
  EXPECT_EQ(crashed["details"]["crash"]["signal_number"], SIGFPE);
  EXPECT_EQ(crashed["details"]["crash"]["function"], "cblas_sgemm");
  EXPECT_FALSE(crashed["details"]["crash"]["stack"].empty());
  EXPECT_EQ(crashed["samples_s"].size(), 0u);
  // The table shows all three, the header once.
  EXPECT_EQ(outcome.out.find("backend"), outcome.out.rfind("backend")) << outcome.out;
  EXPECT_NE(outcome.out.find("gemm m=128"), std::string::npos) << outcome.out;
  // --in-process keeps the old behaviour, for a debugger: the crash ends the run.
  const Outcome in_process = run(
      {"run", "-b", "cpu-openblas", "-w", "gemm m=96", "--in-process", "-o", report_path()}, true,
      {{"LD_PRELOAD", TRAINBENCH_SLOWDOWN_SHIM},
       {"TRAINBENCH_CRASH_MNK", "96,96,96"},
       {"ASAN_OPTIONS", fmt::format("verify_asan_link_order=0:{}", asan ? asan : "")}});
  EXPECT_NE(in_process.exit_code, 0);
  EXPECT_EQ(in_process.err.find("goes on in a new process"), std::string::npos) << in_process.err;
#endif
}

// A crash in the first case and another in the case after it: both are recorded, in the one
// report the run named (without -o too), and the journal's folder goes with the run.
TEST_F(Cli, CrashesInTheFirstAndTheNextCaseAreBothKept) {
#ifndef TRAINBENCH_SLOWDOWN_SHIM
  GTEST_SKIP() << "no cpu-openblas backend in this build: no cblas_sgemm to plant a crash in";
#else
  const char* asan = std::getenv("ASAN_OPTIONS");
  const fs::path temporary = dir_ / "tmp";
  fs::create_directories(temporary);
  const Outcome outcome =
      run({"run", "-b", "cpu-openblas", "-w", "gemm m=96", "-w", "gemm m=96 alpha=2", "-w",
           "gemm m=64", "--threads", "1"},
          true,
          {{"LD_PRELOAD", TRAINBENCH_SLOWDOWN_SHIM},
           {"TRAINBENCH_SLOWDOWN", "0"},
           {"TRAINBENCH_CRASH_MNK", "96,96,96"},
           {"TMPDIR", temporary.string()},
           {"ASAN_OPTIONS", fmt::format("verify_asan_link_order=0:{}", asan ? asan : "")}});
  EXPECT_EQ(outcome.exit_code, 1) << outcome.err;
  std::vector<fs::path> reports;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_))
    if (entry.path().filename().string().starts_with("trainbench-report-"))
      reports.push_back(entry.path());
  ASSERT_EQ(reports.size(), 1u) << outcome.err;
  const nlohmann::json report = read_report(reports[0].string());
  ASSERT_EQ(report["results"].size(), 3u) << report["results"].dump(2);
  for (int i : {0, 1}) {
    EXPECT_EQ(report["results"][i]["status"], "failed") << report["results"][i].dump(2);
    EXPECT_EQ(report["results"][i]["details"]["crash"]["signal_number"], SIGFPE);
  }
  EXPECT_EQ(report["results"][2]["status"], "passed") << report["results"][2].dump(2);
  EXPECT_TRUE(fs::is_empty(temporary)) << "the case journal was left behind";
#endif
}

// A planted slow-down (a preloaded library that makes every cblas_sgemm busy-wait as long
// again) is found by `ab` with 5 runs a side, and only in the case that calls it; one thread,
// so that a neighbour's load on this shared machine does not stall an OpenMP barrier.
TEST_F(Cli, AbFindsAPlantedSlowdown) {
#ifndef TRAINBENCH_SLOWDOWN_SHIM
  GTEST_SKIP() << "no cpu-openblas backend in this build: no cblas_sgemm to slow down";
#else
  const fs::path slowed = dir_ / "slowed-trainbench";
  // verify_asan_link_order=0: under AddressSanitizer the preloaded shim would otherwise come
  // before ASan's runtime, which ASan refuses at start-up (the shim needs no instrumentation).
  std::ofstream(slowed) << fmt::format(
      "#!/bin/sh\nASAN_OPTIONS=\"verify_asan_link_order=0:$ASAN_OPTIONS\" LD_PRELOAD={} "
      "TRAINBENCH_SLOWDOWN=1.0 exec {} \"$@\"\n",
      TRAINBENCH_SLOWDOWN_SHIM, TRAINBENCH_BINARY);
  fs::permissions(slowed, fs::perms::owner_all);
  const Outcome outcome = run({"ab",
                               "--baseline-bin",
                               TRAINBENCH_BINARY,
                               "--current-bin",
                               slowed.string(),
                               "--rounds",
                               "5",
                               "--ab-format",
                               "json",
                               "-b",
                               "cpu-openblas",
                               "-w",
                               "gemm m=256",
                               "-w",
                               "stream op=triad n=1000000",
                               "--time-budget",
                               "0.05",
                               "--warmup-time",
                               "0",
                               "--threads",
                               "1"},
                              false);
  ASSERT_LE(outcome.exit_code, 1) << outcome.out << outcome.err;
  // The builds' own tables come first on stdout, then check's JSON.
  const std::size_t verdicts = outcome.out.rfind("{\n  \"cases\"");
  ASSERT_NE(verdicts, std::string::npos) << outcome.out;
  const nlohmann::json check = nlohmann::json::parse(outcome.out.substr(verdicts));
  ASSERT_EQ(check["cases"].size(), 2u) << check.dump(2);
  for (const nlohmann::json& entry : check["cases"]) {
    const std::string workload = entry["workload"];
    const double noise = entry["comparison"]["run_to_run_noise"];
    EXPECT_EQ(entry["comparison"]["baseline_runs"], 5);
    if (!workload.starts_with("gemm")) {
      EXPECT_NE(entry["verdict"], "slower") << entry.dump(2);  // not slowed: no false alarm
    } else if (noise < 0.25) {
      EXPECT_EQ(entry["verdict"], "slower") << entry.dump(2);
    } else {
      // A neighbour's load made runs differ by more than a quarter: the gate may only say so.
      EXPECT_TRUE(entry["verdict"] == "slower" || entry["verdict"] == "inconclusive")
          << entry.dump(2);
    }
  }
#endif
}

TEST_F(Cli, ConcurrentHistoryAddsLoseNothing) {
  // Twenty distinct reports, added by two processes at once, ten each.
  nlohmann::json report = nlohmann::json::parse(slurp(data("baseline.json")));
  std::vector<std::string> first = {"history", "--db", (dir_ / "h.db").string(), "add"},
                           second = first;
  for (int i = 0; i < 20; ++i) {
    report["started_at"] = fmt::format("2026-10-01T00:00:{:02d}Z", i);
    const std::string path = (dir_ / fmt::format("r{}.json", i)).string();
    std::ofstream(path) << report.dump();
    (i % 2 ? second : first).push_back(path);
  }
  const pid_t a = spawn(first), b = spawn(second);
  int status_a = 0, status_b = 0;
  waitpid(a, &status_a, 0);
  waitpid(b, &status_b, 0);
  ASSERT_TRUE(WIFEXITED(status_a) && WEXITSTATUS(status_a) == 0);
  ASSERT_TRUE(WIFEXITED(status_b) && WEXITSTATUS(status_b) == 0);
  const Outcome list =
      run({"history", "--db", (dir_ / "h.db").string(), "--format", "json", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(nlohmann::json::parse(list.out).size(), 20u);
  const Outcome trend = run({"history", "--db", (dir_ / "h.db").string(), "--format", "json",
                             "trend", "--workload", "stream"});
  ASSERT_EQ(trend.exit_code, 0) << trend.err;
  EXPECT_EQ(nlohmann::json::parse(trend.out)[0]["points"].size(), 20u);
}

// report --html --history: each case of the history's newest machine over its runs; the third
// run 1.5 times slower is marked. Neither reports nor a history is bad input.
TEST_F(Cli, HtmlReportDrawsTheHistory) {
  const std::string db = (dir_ / "h.db").string(), html = (dir_ / "page.html").string();
  std::vector<std::string> add = {"history", "--db", db, "add"};
  const double scales[] = {1.0, 1.01, 1.5};  // each run's times against the first's
  for (int i = 0; i < 3; ++i) {
    nlohmann::json report = nlohmann::json::parse(slurp(data("baseline.json")));
    report["started_at"] = fmt::format("2026-10-2{}T12:00:00Z", i);
    const double scale = scales[i];
    for (nlohmann::json& result : report["results"]) {
      for (nlohmann::json& sample : result["samples_s"]) sample = sample.get<double>() * scale;
      for (auto& [name, value] : result["stats"].items())
        if (name != "count") value = value.get<double>() * scale;
    }
    add.push_back((dir_ / fmt::format("run{}.json", i)).string());
    std::ofstream(add.back()) << report.dump();
  }
  ASSERT_EQ(run(add).exit_code, 0);
  const Outcome outcome = run({"report", "--html", html, "--history", db});
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const std::string page = slurp(html);
  EXPECT_NE(page.find("<h3>gemm m=1024"), std::string::npos);
  EXPECT_NE(page.find("slower than the run before (significant)"), std::string::npos);
  EXPECT_EQ(run({"report", "--html", html}).exit_code, 2);
  EXPECT_EQ(run({"report", "--html", html, "--history", (dir_ / "none.db").string()}).exit_code, 2);
}

TEST_F(Cli, HtmlReportNeverWritesOverAnInput) {
  const std::string input = (dir_ / "input.json").string();
  fs::copy_file(data("baseline.json"), input);
  const std::string before = slurp(input);
  const Outcome outcome = run({"report", "--html", input, input});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_NE(outcome.err.find("refusing to write over it"), std::string::npos) << outcome.err;
  EXPECT_EQ(slurp(input), before);
  EXPECT_EQ(run({"report", "--html", (dir_ / "x.html").string(), (dir_ / "missing.json").string()})
                .exit_code,
            2);
}

// Numbers are finite and in range: nan compares false with every bound, so a check written as
// "fail below 0" lets it through (check --threshold nan passed a run twice as slow).
TEST_F(Cli, NumbersAreFiniteAndInRange) {
  for (const char* option : {"--time-budget", "--warmup-time", "--min-sample-time"})
    for (const char* number : {"nan", "inf", "-1", "2s"})
      expect_usage_error({"run", "-w", "gemm m=8", option, number}, option);
  for (const char* threshold : {"nan", "nan%", "inf", "-5%"}) {
    const Outcome outcome = run({"check", "--baseline", data("baseline.json"), "--current",
                                 data("current_same.json"), "--threshold", threshold});
    EXPECT_EQ(outcome.exit_code, 2) << threshold;
    EXPECT_NE(outcome.err.find("bad threshold"), std::string::npos) << outcome.err;
  }
  // Whole numbers: CLI11 alone turned an out-of-range seed into 2^64 - 1.
  for (const char* seed : {"18446744073709551616", "99999999999999999999999", "-1", "1.5"})
    expect_usage_error({"run", "-w", "gemm m=8", "--seed", seed}, "--seed");
  expect_usage_error({"run", "-w", "gemm m=8", "--threads", "99999999999"}, "--threads");
  expect_usage_error({"run", "--suite", "quick", "-w", "gemm m=8"}, "not both");
  expect_usage_error({"run", "-b", "cpu-onednn", "-w", "gemm m=8", "--threads", "1000000"},
                     "--threads 1000000 is more than");
  for (const char* timeout : {"99999999999999999999", "9223372036854775807", "0", "1e3"}) {
    const Outcome outcome =
        run({"run", "-w", "gemm m=8"}, true, {{"TRAINBENCH_RANK_TIMEOUT", timeout}});
    EXPECT_EQ(outcome.exit_code, 2) << timeout;
    EXPECT_NE(outcome.err.find("TRAINBENCH_RANK_TIMEOUT"), std::string::npos) << outcome.err;
  }
  // A costs file's prices are numbers: a string or a negative price is bad input, not exit 1.
  const std::string costs = (dir_ / "costs.json").string();
  for (const char* file :
       {R"({"baseline.json": {"price_per_hour": "2"}})", R"({"baseline.json": {"watts": -5}})",
        R"({"baseline.json": 3})", R"([1, 2])"}) {
    std::ofstream(costs) << file;
    const Outcome outcome =
        run({"compare", data("baseline.json"), data("current_same.json"), "--costs", costs});
    EXPECT_EQ(outcome.exit_code, 2) << file << ": " << outcome.err;
    EXPECT_NE(outcome.err.find("costs file"), std::string::npos) << outcome.err;
  }
  for (const char* price : {"nan", "-1", "inf"})
    EXPECT_EQ(run({"compare", data("baseline.json"), data("current_same.json"), "--watts",
                   std::string(price) + ",5"})
                  .exit_code,
              2)
        << price;
}

// A report or a history database that trainbench cannot read is bad input to every reader
// (exit 2, one line), and reading a history never creates one.
TEST_F(Cli, UnreadableReportsAndDatabasesAreBadInput) {
  const nlohmann::json good = nlohmann::json::parse(slurp(data("baseline.json")));
  std::vector<std::string> bad;
  auto write = [&](const std::string& name, const std::string& text) {
    bad.push_back((dir_ / name).string());
    std::ofstream(bad.back()) << text;
  };
  write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  std::string overflow = good.dump();
  overflow.replace(overflow.find("\"seed\":42"), 9, "\"seed\":1e999");
  write("overflow.json", overflow);
  nlohmann::json null_stats = good;
  null_stats["results"][0]["stats"] = nullptr;
  write("null_stats.json", null_stats.dump());
  nlohmann::json negative = good;
  negative["results"][0]["stats"]["median_s"] = -1.0;
  write("negative_median.json", negative.dump());
  bad.push_back(dir_.string());  // a directory
  for (const std::string& report : bad) {
    SCOPED_TRACE(report);
    for (const std::vector<std::string>& command :
         {std::vector<std::string>{"summary", report},
          {"compare", data("baseline.json"), report},
          {"history", "--db", (dir_ / "h.db").string(), "add", report},
          {"report", "--html", (dir_ / "page.html").string(), report}}) {
      const Outcome outcome = run(command);
      EXPECT_EQ(outcome.exit_code, 2) << command[0] << " " << report << ": " << outcome.err;
      EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
    }
  }
  // details are free-form in the schema: a breakdown without its totals is bad input to summary
  nlohmann::json broken = good;
  broken["results"][0]["details"] = {{"breakdown", {{"layers", nlohmann::json::array()}}}};
  const std::string broken_path = (dir_ / "broken_details.json").string();
  std::ofstream(broken_path) << broken.dump();
  const Outcome summary = run({"summary", broken_path});
  EXPECT_EQ(summary.exit_code, 2) << summary.err;
  EXPECT_NE(summary.err.find("cannot read"), std::string::npos) << summary.err;
  const std::string missing = (dir_ / "missing.db").string();
  EXPECT_EQ(run({"history", "--db", missing, "list"}).exit_code, 2);
  EXPECT_EQ(run({"history", "--db", missing, "trend", "--workload", "gemm"}).exit_code, 2);
  EXPECT_FALSE(fs::exists(missing));
  const std::string not_a_database = (dir_ / "text.db").string();
  std::ofstream(not_a_database) << "not a database, but long enough to be read as one's header\n";
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"history", "--db", not_a_database, "list"},
        {"history", "--db", not_a_database, "add", data("baseline.json")}}) {
    const Outcome outcome = run(command);
    EXPECT_EQ(outcome.exit_code, 2) << command[3] << ": " << outcome.err;
  }
}

// Every written path (-o, --html, history's --db) replaces only a regular file the user may
// write: a device, a directory or a read-only report is refused before anything runs, exit 2.
TEST_F(Cli, OutputPathsNeverReplaceWhatIsNotAWritableReport) {
  const std::string kept = (dir_ / "kept.json").string();
  fs::copy_file(data("baseline.json"), kept);
  fs::permissions(kept, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  const std::string before = slurp(kept);
  for (const std::string& path : {std::string("/dev/null"), dir_.string(), kept}) {
    const Outcome outcome = run({"run", "-b", "cpu-onednn", "-w", "gemm m=8", "-o", path});
    EXPECT_EQ(outcome.exit_code, 2) << path;
    EXPECT_NE(outcome.err.find("will not write " + path), std::string::npos) << outcome.err;
    EXPECT_EQ(outcome.err.find("[1/1]"), std::string::npos) << "nothing runs: " << outcome.err;
    EXPECT_EQ(run({"report", "--html", path, data("baseline.json")}).exit_code, 2) << path;
    EXPECT_EQ(run({"history", "--db", path, "add", data("baseline.json")}).exit_code, 2) << path;
  }
  struct stat info {};
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  EXPECT_EQ(slurp(kept), before);
  const std::string link = (dir_ / "latest.json").string();  // written through, said so
  fs::create_symlink(report_path(), link);
  EXPECT_EQ(run({"run", "-b", "cpu-onednn", "-w", "gemm m=8", "-o", link}).exit_code, 0);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_report(report_path())["results"].size(), 1u);
}

TEST_F(Cli, KilledMidRunLeavesAValidReportWithFinishedCases) {
  std::vector<std::string> args = {"run",           "-o", report_path(), "--time-budget", "0.2",
                                   "--warmup-time", "0"};
  for (int i = 0; i < 40; ++i) args.insert(args.end(), {"-w", fmt::format("gemm m={}", 64 + i)});
  const pid_t pid = spawn(args);
  std::size_t finished = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finished < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    try {
      finished = read_report(report_path())["results"].size();
    } catch (const ReportError&) {  // not written yet
    }
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  const nlohmann::json report = read_report(report_path());  // valid JSON, valid schema
  EXPECT_GE(report["results"].size(), 2u);
  EXPECT_LT(report["results"].size(), 40u);
  EXPECT_TRUE(report["finished_at"].is_null());
  for (const auto& result : report["results"]) EXPECT_EQ(result["status"], "passed");
}

}  // namespace
}  // namespace tb

namespace tb {
namespace {

// The counter of a fake powercap package zone, advanced by `step_uj` every 10 ms until `pid`
// exits (not reaped: wait_for does that). Each value lands by rename, so a reader never sees
// half a file.
void advance_counter_while_running(const fs::path& zone, pid_t pid, std::uint64_t step_uj) {
  std::uint64_t energy_uj = 0;
  siginfo_t info{};
  for (;;) {
    info.si_pid = 0;
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid == pid)
      return;
    energy_uj += step_uj;
    std::ofstream(zone / "energy_uj.next") << energy_uj << "\n";
    fs::rename(zone / "energy_uj.next", zone / "energy_uj");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A case of known size: STREAM's three arrays of n doubles. The computed footprint is theirs,
// the allocator's peak that plus page rounding, and the process grew by at least that much
// (allocate() touches every page); nothing is flagged. A powercap tree whose package counter
// moves while the case runs gives it joules, watts and its GB/s per watt, in GB/J.
TEST_F(Cli, MemoryAndEnergyOfACaseOfKnownSize) {
  const fs::path zone = dir_ / "powercap" / "intel-rapl:0";
  fs::create_directories(zone);
  std::ofstream(zone / "name") << "package-0\n";
  std::ofstream(zone / "max_energy_range_uj") << "262143328850\n";
  std::ofstream(zone / "energy_uj") << "0\n";
  const std::uint64_t n = 4u << 20;
  const pid_t pid = spawn({"run", "-b", "cpu-onednn", "-w", fmt::format("stream op=triad n={}", n),
                           "--time-budget", "0.5", "--min-reps", "2", "-o", report_path()},
                          {{"TRAINBENCH_POWERCAP_ROOT", (dir_ / "powercap").string()}});
  advance_counter_while_running(zone, pid, 500'000);  // 0.5 J per 10 ms: about 50 W
  const Outcome outcome = wait_for(pid);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json result = read_report(report_path())["results"][0];
  ASSERT_EQ(result["status"], "passed") << result["reason"];
  const nlohmann::json& memory = result["memory"];
  const std::uint64_t computed = 3 * n * sizeof(double);
  EXPECT_EQ(memory["computed_bytes"].get<std::uint64_t>(), computed);
  const std::uint64_t allocated = memory["timed_allocated_peak_bytes"];
  EXPECT_GE(memory["allocated_peak_bytes"].get<std::uint64_t>(), allocated);
  EXPECT_GE(allocated, computed);
  EXPECT_LE(allocated, computed + (8u << 20)) << "three arrays, each rounded to a huge page";
  if (memory["resident_peak_reset"].get<bool>()) {
    const std::uint64_t start = memory["resident_start_bytes"];
    EXPECT_GE(memory["resident_peak_bytes"].get<std::uint64_t>() - start, computed * 95 / 100);
    // Set-up filled the three arrays before validation read them.
    EXPECT_GE(memory["validation_resident_peak_bytes"].get<std::uint64_t>() - start,
              computed * 95 / 100);
  }
  EXPECT_FALSE(memory.contains("flag")) << memory["flag"];
  const nlohmann::json& energy = result["energy"];
  EXPECT_EQ(energy["source"], "powercap");
  ASSERT_TRUE(energy.contains("joules")) << energy.dump();
  EXPECT_GT(energy["joules"].get<double>(), 0);
  EXPECT_GT(energy["average_w"].get<double>(), 0);
  EXPECT_EQ(energy["per_joule"]["unit"], "GB/J");
  EXPECT_NEAR(energy["per_joule"]["value"].get<double>(),
              result["metrics"]["gbps"].get<double>() / energy["average_w"].get<double>(), 1e-9);
}

// The capacity planner against what two small model cases measured: every prediction within
// the tolerance; the same report with one peak doubled fails; the measured activations feed a
// plan of the same model at another shape; what it cannot plan is a usage error.
TEST_F(Cli, PlanPredictsTheMeasuredPeaks) {
  const Outcome measured =
      run({"run", "-b", "cpu-onednn", "-w", "resnet50-train batch=2 image=64 classes=10", "-w",
           "bert-train model=tiny batch=2 seq=32", "--min-reps", "1", "--max-reps", "1", "--warmup",
           "0", "-o", report_path()},
          false);
  ASSERT_EQ(measured.exit_code, 0) << measured.err;
  const Outcome check = run({"plan", "--check", report_path()});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("every prediction within the tolerance"), std::string::npos)
      << check.out;
  // A time-to-train case is named as not checked, not passed over.
  nlohmann::json with_ttt = read_report(report_path());
  nlohmann::json ttt = with_ttt["results"][0];
  ttt["workload"] = "ttt-fashion-mnist target=0.5 subset=2048";
  with_ttt["results"].push_back(ttt);
  std::ofstream(dir_ / "with_ttt.json") << with_ttt.dump();
  const Outcome named = run({"plan", "--check", (dir_ / "with_ttt.json").string()});
  EXPECT_EQ(named.exit_code, 0) << named.out << named.err;
  EXPECT_NE(named.out.find("not checked: ttt-fashion-mnist target=0.5 subset=2048 on cpu-onednn"),
            std::string::npos)
      << named.out;
  nlohmann::json damaged = read_report(report_path());
  nlohmann::json& memory = damaged["results"][1]["memory"];
  memory["timed_allocated_peak_bytes"] =
      2 * memory["timed_allocated_peak_bytes"].get<std::uint64_t>();
  std::ofstream(dir_ / "damaged.json") << damaged.dump();
  const Outcome caught = run({"plan", "--check", (dir_ / "damaged.json").string()});
  EXPECT_EQ(caught.exit_code, 1) << caught.out << caught.err;
  EXPECT_NE(caught.out.find("outside the tolerance"), std::string::npos) << caught.out;
  const Outcome plan = run({"plan", "-w", "bert-train model=tiny batch=8 seq=64", "--report",
                            report_path(), "--memory-gib", "1", "--reserve-gib", "0.5"});
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("measured: bert-train model=tiny batch=2 seq=32"), std::string::npos)
      << plan.out;
  EXPECT_NE(plan.out.find("answer: fits on one device"), std::string::npos) << plan.out;
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"plan", "-w", "gemm m=64", "--memory-gib", "1"}, "plan takes a model workload"},
           {{"plan", "--parameters", "1e9", "--activation-bytes-per-sample", "1e6"},
            "plan needs the device's memory"},
           {{"plan", "--memory-gib", "1"}, "plan needs -w MODEL_WORKLOAD"}}) {
    const Outcome refused = run(args);
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find(says), std::string::npos) << refused.err;
  }
}

}  // namespace
}  // namespace tb
