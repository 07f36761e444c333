#include "bench/child_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "backends/host/host_info.h"
#include "backends/registry.h"
#include "backends/status.h"
#include "bench/case_isolation.h"
#include "reports/report.h"

extern char** environ;

namespace tb {
namespace {

bool valid_variable_name(const std::string& name) {
  return !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
         std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

}  // namespace

ChildEnvironment ChildEnvironment::parse(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size())
    throw UsageError(fmt::format("--child-env '{}': expected BACKEND:NAME=VALUE,-NAME,...", spec));
  ChildEnvironment environment;
  environment.backend = spec.substr(0, colon);
  if (!find_backend(environment.backend))
    throw UsageError(
        fmt::format("--child-env '{}': unknown backend '{}'", spec, environment.backend));
  std::string rest = spec.substr(colon + 1);
  for (std::size_t start = 0; start <= rest.size();) {
    const std::size_t end = std::min(rest.find(',', start), rest.size());
    const std::string item = rest.substr(start, end - start);
    start = end + 1;
    const auto eq = item.find('=');
    std::string name = item.substr(0, eq);
    std::optional<std::string> value;
    if (eq != std::string::npos) value = item.substr(eq + 1);
    const bool unset = !value && !name.empty() && name[0] == '-';
    if (unset) name.erase(0, 1);
    if (!valid_variable_name(name) || (!unset && !value))
      throw UsageError(
          fmt::format("--child-env '{}': '{}' is neither NAME=VALUE nor -NAME", spec, item));
    environment.changes.emplace_back(name, value);
  }
  return environment;
}

std::string ChildEnvironment::label() const {
  std::vector<std::string> items;
  for (const auto& [name, value] : changes)
    items.push_back(value ? name + "=" + *value : "-" + name);
  return fmt::format("{}[{}]", backend, fmt::join(items, ","));
}

ChildOutcome run_child(const ChildEnvironment& environment,
                       const std::vector<std::string>& arguments, const std::string& report_path) {
  std::map<std::string, std::string> variables;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string text = *entry;
    const auto eq = text.find('=');
    if (eq != std::string::npos) variables[text.substr(0, eq)] = text.substr(eq + 1);
  }
  // The child run keeps its own case journal (case_isolation.h), not this process's.
  variables.erase(kCaseJournalVariable);
  for (const auto& [name, value] : environment.changes) {
    if (value)
      variables[name] = *value;
    else
      variables.erase(name);
  }
  std::vector<std::string> env_strings,
      argv_strings = {"trainbench", "run", "-b", environment.backend};
  for (const auto& [name, value] : variables) env_strings.push_back(name + "=" + value);
  argv_strings.insert(argv_strings.end(), arguments.begin(), arguments.end());
  argv_strings.insert(argv_strings.end(), {"-o", report_path});
  auto pointers = [](std::vector<std::string>& strings) {
    std::vector<char*> result;
    for (std::string& s : strings) result.push_back(s.data());
    result.push_back(nullptr);
    return result;
  };
  std::vector<char*> argv = pointers(argv_strings), envp = pointers(env_strings);

  std::fflush(nullptr);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const pid_t pid = fork();
  if (pid < 0)
    return {std::nullopt, fmt::format("cannot start the child run: {}", std::strerror(errno))};
  if (pid == 0) {
    // The child gets every CPU this process started with, not the one its main thread is pinned to.
    sched_setaffinity(0, sizeof(cpu_set_t), &cpu::process_cpus());
    execve(self.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  // 0: all passed; 1: some cases failed, which its report says. Anything else: no usable report.
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
    return {std::nullopt, WIFEXITED(status)
                              ? fmt::format("child run exited with code {}", WEXITSTATUS(status))
                              : fmt::format("child run killed by signal {}", WTERMSIG(status))};
  try {
    ChildOutcome outcome{read_report(report_path), ""};
    std::filesystem::remove(report_path);
    return outcome;
  } catch (const ReportError& e) {
    return {std::nullopt, e.what()};
  }
}

}  // namespace tb
