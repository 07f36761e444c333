// The fixture of the CLI tests: runs the trainbench binary (or a launcher starting it) in a
// temporary directory and captures its exit code and output.
#pragma once
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tests/temp_dir.h"

namespace tb {

namespace fs = std::filesystem;

struct Outcome {
  int exit_code = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& path) {
  return testing_support::file_text(path);
}

// Small, fast harness settings for every run in these tests.
inline const std::vector<std::string> kQuick = {"--time-budget", "0.02", "--min-reps",    "2",
                                                "--warmup",      "1",    "--warmup-time", "0"};

class Cli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("trainbench-cli-test-{}-{}", getpid(),
                       testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  // A failed test shows what each run printed: an exit code alone does not say why.
  void TearDown() override {
    if (HasFailure())
      for (const std::string& entry : transcript_) std::fprintf(stderr, "%s\n", entry.c_str());
    fs::remove_all(dir_);
  }

  pid_t spawn(std::vector<std::string> args,
              const std::vector<std::pair<std::string, std::string>>& env = {}) {
    args.insert(args.begin(), TRAINBENCH_BINARY);
    return spawn_program(args, env);
  }

  // args[0] is the program.
  pid_t spawn_program(std::vector<std::string> args,
                      const std::vector<std::pair<std::string, std::string>>& env) {
    const pid_t pid = fork();
    if (pid == 0) {
      for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
      const int out = ::open((dir_ / "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open((dir_ / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      dup2(err, 2);
      chdir(dir_.c_str());
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    commands_[pid] = fmt::format("{}", fmt::join(args, " "));
    return pid;
  }

  Outcome run(std::vector<std::string> args, bool quick = true,
              const std::vector<std::pair<std::string, std::string>>& env = {}) {
    if (quick && !args.empty() && args[0] == "run")
      args.insert(args.end(), kQuick.begin(), kQuick.end());
    return wait_for(spawn(args, env));
  }

  Outcome wait_for(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    Outcome outcome{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                    slurp(dir_ / "stdout"), slurp(dir_ / "stderr")};
    transcript_.push_back(fmt::format("--- {}\n--- exit {}; stderr:\n{}", commands_[pid],
                                      outcome.exit_code, outcome.err));
    return outcome;
  }

  // `command` through bash in the test's folder, with `tb` set to the binary.
  Outcome shell(const std::string& command) {
    return wait_for(spawn_program({"/bin/bash", "-c", command}, {{"tb", TRAINBENCH_BINARY}}));
  }

  // Whether the tests may make mount namespaces (root, or user namespaces) for small or
  // read-only file systems.
  static bool can_mount() { return std::system("unshare -m true > /dev/null 2>&1") == 0; }

  std::string report_path() const { return (dir_ / "report.json").string(); }

  // A usage error: exit 2, one line on stderr saying what is wrong, no report written.
  void expect_usage_error(std::vector<std::string> args, const std::string& says) {
    args.insert(args.end(), {"-o", report_path()});
    const Outcome outcome = run(args);
    EXPECT_EQ(outcome.exit_code, 2) << outcome.err;
    EXPECT_NE(outcome.err.find(says), std::string::npos) << outcome.err;
    EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
    EXPECT_FALSE(fs::exists(report_path()));
  }

  fs::path dir_;

 private:
  std::map<pid_t, std::string> commands_;  // each spawned child's command line
  std::vector<std::string> transcript_;    // each finished run: command, exit code, stderr
};

}  // namespace tb
