// `trainbench run` on several hosts made on this machine (scripts/netns_cluster.sh: network
// namespaces with their own host names and addresses, Open MPI's TCP transport between them):
// the world block naming every host, and the faults that only several hosts have (a cut link,
// a lossy link, one host's ranks killed), each ending the job with a line naming the rank and
// its host, a non-zero exit and rank 0's report keeping every case finished before.
#include <chrono>

#include "reports/report.h"
#include "tests/cli/cli_fixture.h"

namespace tb {
namespace {

constexpr int kSkipped = 77;  // netns_cluster.sh: no namespaces here (not root, no iproute2)

class Hosts : public Cli {
 protected:
  // trainbench ARGS on `hosts` hosts of `ranks_per_host` ranks; `options` go to the script.
  Outcome on_hosts(int hosts, int ranks_per_host, const std::vector<std::string>& options,
                   const std::vector<std::string>& args,
                   const std::vector<std::pair<std::string, std::string>>& env = {}) {
    std::vector<std::string> command = {
        "/bin/bash", std::string(TRAINBENCH_SOURCE_DIR) + "/scripts/netns_cluster.sh",
        std::to_string(hosts), "--ranks-per-host", std::to_string(ranks_per_host)};
    command.insert(command.end(), options.begin(), options.end());
    command.push_back("--");
    command.insert(command.end(), args.begin(), args.end());
    std::vector<std::pair<std::string, std::string>> all_env = env;
    all_env.emplace_back("TRAINBENCH_BINARY", TRAINBENCH_BINARY);
    return wait_for(spawn_program(command, all_env));
  }

  // Two cases; the fault lands in the second, a second or more after the first is written,
  // however fast the machine: rank 1 starts each phase of a case 2 s late (rank 0 waits for it in
  // the case's first collective), and a step is sampled for 8 s.
  std::vector<std::string> two_cases(const std::string& second_case) const {
    return {"run",      "-b",         "cpu-onednn", "-o", report_path(),        "--time-budget",
            "8",        "--max-reps", "100000",     "-w", "allreduce bytes=1M", "-w",
            second_case};
  }
  // The faults' environment: the rank timeout (5 s) and rank 1's late start.
  static std::vector<std::pair<std::string, std::string>> fault_env(bool rank_timeout = true) {
    std::vector<std::pair<std::string, std::string>> env = {{"TRAINBENCH_TEST_RANK_DELAY", "1:2"}};
    if (rank_timeout) env.emplace_back("TRAINBENCH_RANK_TIMEOUT", "5");
    return env;
  }
  std::string fault_after_first_case(const std::string& kind, int seconds = 1) const {
    return fmt::format("{}@{}=1+{}", kind, report_path(), seconds);
  }

  // The job ended by `kind` on the last host: non-zero, the line, the first case kept.
  void expect_ended_keeping_the_first_case(const Outcome& outcome, const std::string& line) {
    EXPECT_NE(outcome.exit_code, 0);
    EXPECT_NE(outcome.err.find(line), std::string::npos) << outcome.err;
    EXPECT_NE(outcome.err.find("netns_cluster: the job ended"), std::string::npos) << outcome.err;
    const nlohmann::json report = read_report(report_path());
    ASSERT_EQ(report["results"].size(), 1u) << report["results"].dump();
    EXPECT_EQ(report["results"][0]["status"], "passed");
    EXPECT_TRUE(report["finished_at"].is_null());
  }
};

#define SKIP_WITHOUT_HOSTS(outcome)                                  \
  if ((outcome).exit_code == kSkipped) {                             \
    GTEST_SKIP() << "no network namespaces here: " << (outcome).err; \
  }

TEST_F(Hosts, TheWorldBlockNamesEveryHostAndItsRanks) {
  for (const int ranks_per_host : {1, 2}) {
    std::vector<std::string> args = {"run",
                                     "-b",
                                     "cpu-onednn",
                                     "-o",
                                     report_path(),
                                     "-w",
                                     "allreduce sizes=4K:1M:x16",
                                     "-w",
                                     "gemm m=64 n=48 k=32"};
    args.insert(args.end(), kQuick.begin(), kQuick.end());
    const Outcome outcome = on_hosts(2, ranks_per_host, {}, args);
    SKIP_WITHOUT_HOSTS(outcome);
    ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
    const nlohmann::json report = read_report(report_path());
    const nlohmann::json& world = report["world"];
    EXPECT_EQ(world["size"], 2 * ranks_per_host);
    EXPECT_EQ(world["ranks_per_node"], ranks_per_host);
    ASSERT_EQ(world["ranks"].size(), 2u * ranks_per_host);
    for (int rank = 0; rank < 2 * ranks_per_host; ++rank) {
      const nlohmann::json& r = world["ranks"][rank];
      EXPECT_EQ(r["host"], fmt::format("trainbench-host{}", 1 + rank / ranks_per_host)) << r;
      EXPECT_EQ(r["local_rank"], rank % ranks_per_host) << r;
    }
    ASSERT_EQ(report["results"].size(), 4u);  // all-reduces of 4 KiB, 64 KiB and 1 MiB, a GEMM
    for (const nlohmann::json& result : report["results"]) {
      EXPECT_EQ(result["status"], "passed") << result.dump();
      EXPECT_EQ(result["ranks"].size(), 2u * ranks_per_host);
    }
  }
}

// Rank 0 waits for the rank timeout (in the collective, or in the harness's agreement between its
// samples), then ends the job; the launcher gives up on the cut host (scripts/netns_cluster.sh
// lets it retransmit for about 13 s).
TEST_F(Hosts, ACutLinkDuringACollectiveEndsTheJob) {
  const Outcome outcome = on_hosts(2, 1, {"--fault", fault_after_first_case("link-down")},
                                   two_cases("allreduce bytes=256M"), fault_env());
  SKIP_WITHOUT_HOSTS(outcome);
  expect_ended_keeping_the_first_case(outcome, "rank 0 of 2 (trainbench-host1): waited 5 s in ");
  EXPECT_NE(outcome.err.find("during case 2 of 2 (allreduce bytes=268435456"), std::string::npos)
      << outcome.err;
}

TEST_F(Hosts, ACutLinkDuringADataParallelStepEndsTheJob) {
  const Outcome outcome = on_hosts(2, 1, {"--fault", fault_after_first_case("link-down", 3)},
                                   two_cases("bert-train model=tiny batch=4 seq=32"), fault_env());
  SKIP_WITHOUT_HOSTS(outcome);
  expect_ended_keeping_the_first_case(outcome, "rank 0 of 2 (trainbench-host1): waited 5 s in ");
  EXPECT_NE(outcome.err.find("during case 2 of 2 (bert-train model=tiny"), std::string::npos)
      << outcome.err;
}

// 30% of the packets reaching one host lost: TCP's retransmissions stall the collective past the
// rank timeout, and each waiting rank says so.
TEST_F(Hosts, ALossyLinkEndsTheJobAtTheRankTimeout) {
  const Outcome outcome = on_hosts(2, 1, {"--fault", fault_after_first_case("loss=30")},
                                   two_cases("allreduce bytes=256M"), fault_env());
  SKIP_WITHOUT_HOSTS(outcome);
  expect_ended_keeping_the_first_case(outcome, "of 2 (trainbench-host");
  EXPECT_NE(outcome.err.find("waited 5 s in MPI_Allreduce during case 2 of 2"), std::string::npos)
      << outcome.err;
}

TEST_F(Hosts, KilledRanksOfOneHostEndTheJob) {
  const Outcome outcome = on_hosts(2, 1, {"--fault", fault_after_first_case("kill")},
                                   two_cases("allreduce bytes=256M"), fault_env(false));
  SKIP_WITHOUT_HOSTS(outcome);
  expect_ended_keeping_the_first_case(outcome, "rank 1 with PID");
  EXPECT_NE(outcome.err.find("on node trainbench-host2 exited on signal 9"), std::string::npos)
      << outcome.err;
}

}  // namespace
}  // namespace tb
