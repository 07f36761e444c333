// `trainbench run` across ranks under mpiexec: one report with the world block, ranks that
// disagree on what to run, a rank that dies and a rank that hangs (the others must not wait for
// ever, and rank 0's report keeps every case finished before).
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "reports/report.h"
#include "tests/cli/cli_fixture.h"

namespace tb {
namespace {

class Ranks : public Cli {
 protected:
  void SetUp() override {
#ifndef TRAINBENCH_MPIEXEC
    GTEST_SKIP() << "built without MPI (TRAINBENCH_MPI=OFF or Open MPI not installed)";
#endif
    Cli::SetUp();
  }

  // `ranks` processes of trainbench `args` under mpiexec on this machine.
  pid_t spawn_ranks(int ranks, const std::vector<std::string>& args,
                    const std::vector<std::pair<std::string, std::string>>& env = {}) {
#ifdef TRAINBENCH_MPIEXEC
    std::vector<std::string> command = {TRAINBENCH_MPIEXEC,    "-np",
                                        std::to_string(ranks), "--oversubscribe",
                                        "--allow-run-as-root", TRAINBENCH_BINARY};
    command.insert(command.end(), args.begin(), args.end());
    return spawn_launcher(command, env);
#else
    (void)ranks, (void)args, (void)env;
    return -1;
#endif
  }

  // Under the sanitizers, Open MPI's own leaks are suppressed by library
  // (scripts/lsan_openmpi.supp), which needs whole stacks; other builds ignore the option.
  pid_t spawn_launcher(const std::vector<std::string>& command,
                       std::vector<std::pair<std::string, std::string>> env = {}) {
    const char* asan = std::getenv("ASAN_OPTIONS");
    env.emplace_back("ASAN_OPTIONS", std::string(asan ? asan : "") + ":fast_unwind_on_malloc=0");
    return spawn_program(command, env);
  }

  // The pid of rank `rank` of a run writing `report`, read from the ranks' environments.
  static pid_t find_rank(int rank, const std::string& report) {
    for (const auto& entry : fs::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string command = slurp(entry.path() / "cmdline");
      if (command.find(report) == std::string::npos || command.find("mpiexec") != std::string::npos)
        continue;
      std::string environment(1, '\n');  // so the first variable starts after a newline too
      environment += slurp(entry.path() / "environ");
      environment += '\n';
      std::replace(environment.begin(), environment.end(), '\0', '\n');
      if (environment.find(fmt::format("\nOMPI_COMM_WORLD_RANK={}\n", rank)) != std::string::npos)
        return std::stoi(name);
    }
    return -1;
  }

  // Waits until the report on disk holds `results` results (or the run ended).
  void wait_for_results(std::size_t results, pid_t launcher) {
    for (int i = 0; i < 600; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      siginfo_t info{};  // WNOWAIT: the launcher's exit status stays for wait_for
      if (waitid(P_PID, static_cast<id_t>(launcher), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == launcher)
        return;
      try {
        if (fs::exists(report_path()) && read_report(report_path())["results"].size() >= results)
          return;
      } catch (const std::exception&) {
      }
    }
  }

  // Five cases of about a second each.
  std::vector<std::string> slow_cases() const {
    std::vector<std::string> args = {
        "run",        "-b", "cpu-onednn",    "-o", report_path(),       "--min-reps", "20",
        "--max-reps", "20", "--time-budget", "0",  "--min-sample-time", "0.05"};
    for (int i = 0; i < 5; ++i)
      args.insert(args.end(), {"-w", fmt::format("stream n={}", 1000000 + i)});
    return args;
  }
};

TEST_F(Ranks, TwoRanksWriteOneReportWithTheWorldBlock) {
  std::vector<std::string> args = {"run", "-b",         "cpu-onednn", "-w", "gemm m=64 n=48 k=32",
                                   "-o",  report_path()};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  const Outcome outcome = wait_for(spawn_ranks(2, args));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json report = read_report(report_path());
  const nlohmann::json& world = report["world"];
  EXPECT_EQ(world["size"], 2);
  EXPECT_EQ(world["ranks_per_node"], 2);
  EXPECT_TRUE(world["launched"].get<bool>());
  EXPECT_NE(world["mpi"].get<std::string>().find("MPI"), std::string::npos);
  EXPECT_TRUE(world["nccl"].is_null());  // no GPU backend in this run
  ASSERT_EQ(world["ranks"].size(), 2u);
  EXPECT_EQ(world["ranks"][1]["rank"], 1);
  ASSERT_EQ(report["results"].size(), 1u);
  const nlohmann::json& result = report["results"][0];
  EXPECT_EQ(result["status"], "passed") << result.dump();
  ASSERT_EQ(result["ranks"].size(), 2u);
  for (const nlohmann::json& rank : result["ranks"]) EXPECT_EQ(rank["status"], "passed");
  // Rank 0 alone prints the table: one header line.
  EXPECT_EQ(std::count(outcome.out.begin(), outcome.out.end(), '\n'), 2) << outcome.out;
}

TEST_F(Ranks, UnboundRanksOfAHostEachTakeAShareOfItsCores) {
  std::vector<std::string> args = {"run", "-b",         "cpu-onednn", "-w", "stream n=100000",
                                   "-o",  report_path()};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
#ifdef TRAINBENCH_MPIEXEC
  std::vector<std::string> command = {
      TRAINBENCH_MPIEXEC, "-np", "2", "--bind-to", "none", "--oversubscribe", "--allow-run-as-root",
      TRAINBENCH_BINARY};
  command.insert(command.end(), args.begin(), args.end());
  const Outcome outcome = wait_for(spawn_launcher(command));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json report = read_report(report_path());
  const nlohmann::json& world = report["world"];
  const std::string binding = world["binding"];
  EXPECT_NE(binding.find("were started on the same"), std::string::npos) << binding;
  const std::vector<int> a = world["ranks"][0]["cpus"], b = world["ranks"][1]["cpus"];
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  if (report["host"]["cores"].get<int>() >= 2) {  // else both must share the one core
    EXPECT_EQ(binding.find("each rank on CPUs of its own"), 0u) << binding;
    for (int cpu : a) EXPECT_EQ(std::count(b.begin(), b.end(), cpu), 0) << cpu;
    for (const nlohmann::json& rank : world["ranks"]) {  // a thread per core of the share
      const std::size_t threads = rank["devices"][0]["threads_used"];
      EXPECT_GE(threads, 1u);
      EXPECT_LE(threads, rank["cpus"].size());
      for (int cpu : rank["devices"][0]["affinity"])
        EXPECT_EQ(std::count(rank["cpus"].begin(), rank["cpus"].end(), cpu), 1) << cpu;
    }
  }
#endif
}

TEST_F(Ranks, RanksThatDisagreeOnTheCasesEndTheJobWithTheReason) {
  // Each rank asks for another size: their results could not be combined.
  const std::string line = fmt::format(
      "exec {} run -b cpu-onednn -w \"gemm m=$((64 + OMPI_COMM_WORLD_RANK)) n=8 k=8\" -o {}",
      TRAINBENCH_BINARY, report_path());
#ifdef TRAINBENCH_MPIEXEC
  const Outcome outcome =
      wait_for(spawn_launcher({TRAINBENCH_MPIEXEC, "-np", "2", "--oversubscribe",
                               "--allow-run-as-root", "/bin/sh", "-c", line},
                              {}));
  EXPECT_NE(outcome.exit_code, 0);
  EXPECT_NE(outcome.err.find("rank 1 does not run what rank 0 runs"), std::string::npos)
      << outcome.err;
  EXPECT_NE(outcome.err.find("gemm m=65"), std::string::npos) << outcome.err;
  EXPECT_FALSE(fs::exists(report_path()));
#endif
}

TEST_F(Ranks, ADyingRankEndsTheJobAndTheReportKeepsFinishedCases) {
  const pid_t launcher = spawn_ranks(2, slow_cases());
  wait_for_results(1, launcher);
  const pid_t victim = find_rank(1, report_path());
  ASSERT_GT(victim, 0) << "rank 1 not found (did the run end early?)";
  kill(victim, SIGKILL);
  const auto start = std::chrono::steady_clock::now();
  const Outcome outcome = wait_for(launcher);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_NE(outcome.exit_code, 0);
  const nlohmann::json report = read_report(report_path());
  EXPECT_GE(report["results"].size(), 1u);
  EXPECT_LT(report["results"].size(), 5u);
  EXPECT_EQ(report["results"][0]["status"], "passed");
  EXPECT_TRUE(report["finished_at"].is_null());
}

TEST_F(Ranks, AHangingRankEndsTheJobAfterTheRankTimeoutWithTheReason) {
  const pid_t launcher = spawn_ranks(2, slow_cases(), {{"TRAINBENCH_RANK_TIMEOUT", "5"}});
  wait_for_results(1, launcher);
  const pid_t sleeper = find_rank(1, report_path());
  ASSERT_GT(sleeper, 0) << "rank 1 not found (did the run end early?)";
  kill(sleeper, SIGSTOP);  // alive, but never reaches the next exchange
  const auto start = std::chrono::steady_clock::now();
  const Outcome outcome = wait_for(launcher);
  kill(sleeper, SIGKILL);  // in case the launcher left it
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_NE(outcome.exit_code, 0);
  EXPECT_NE(outcome.err.find("waited 5 s"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("died or hangs"), std::string::npos) << outcome.err;
  EXPECT_GE(read_report(report_path())["results"].size(), 1u);
}

// Data-parallel cases and a data-parallel time to train under the default harness settings
// (warm-up time, a time budget, units per sample sized from the warm-up), rank 1 starting each
// phase of the harness half a second late, as a rank preempted then would. Rank 0 waits that
// half second in its first step, on its own clock: deciding alone, it would stop sampling
// about 0.5 s of steps before rank 1 and leave it waiting in a gradient all-reduce until the
// rank timeout (exit 3). Agreed, every case passes; the timeout, far above the seconds each
// case takes, bounds the test.
TEST_F(Ranks, DataParallelCasesAgreeOnTheirStepsWhenOneRankIsLate) {
  const std::vector<std::string> args = {
      "run",
      "-b",
      "cpu-onednn",
      "-o",
      report_path(),
      "-w",
      "resnet50-train batch=2 image=64 width=8 classes=10",
      "-w",
      "bert-train model=tiny batch=4 seq=32",
      "-w",
      "ttt-fashion-mnist target=0.5 subset=6400 batch=64 epochs=1"};
  const Outcome outcome = wait_for(spawn_ranks(
      2, args, {{"TRAINBENCH_TEST_RANK_DELAY", "1:0.5"}, {"TRAINBENCH_RANK_TIMEOUT", "240"}}));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  const nlohmann::json report = read_report(report_path());
  ASSERT_EQ(report["results"].size(), 3u);
  for (const nlohmann::json& result : report["results"]) {
    EXPECT_EQ(result["status"], "passed") << result.dump();
    EXPECT_EQ(result["ranks"].size(), 2u);
  }
}

// A collective at two ranks: its bus bandwidth in the report and the table; a size the ranks
// cannot split fails its case with one line, the others still run, and the run exits 1.
TEST_F(Ranks, CollectivesReportBusBandwidthAndAnUnsplittableSizeFailsWithOneLine) {
  std::vector<std::string> args = {"run",
                                   "-b",
                                   "cpu-onednn",
                                   "--threads",
                                   "1",
                                   "-w",
                                   "reduce_scatter bytes=12",
                                   "-w",
                                   "allreduce bytes=4K",
                                   "-o",
                                   report_path()};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  const Outcome outcome = wait_for(spawn_ranks(2, args));
  EXPECT_EQ(outcome.exit_code, 1) << outcome.err;
  const nlohmann::json report = read_report(report_path());
  ASSERT_EQ(report["results"].size(), 2u);
  const nlohmann::json& unsplittable = report["results"][0];
  EXPECT_EQ(unsplittable["status"], "failed");
  const std::string reason = unsplittable["reason"];
  EXPECT_NE(reason.find("3 elements cannot be split evenly over 2 ranks"), std::string::npos)
      << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
  const nlohmann::json& allreduce = report["results"][1];
  ASSERT_EQ(allreduce["status"], "passed") << allreduce.dump();
  EXPECT_EQ(allreduce["details"]["world_size"], 2);
  const double busbw = allreduce["metrics"]["busbw_gbps"];
  EXPECT_GT(busbw, 0);
  EXPECT_DOUBLE_EQ(busbw, allreduce["metrics"]["algbw_gbps"].get<double>());  // 2(n-1)/n = 1
  EXPECT_NE(outcome.out.find(fmt::format("{:.3g}", busbw)), std::string::npos) << outcome.out;
}

}  // namespace
}  // namespace tb
