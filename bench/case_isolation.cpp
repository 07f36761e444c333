#include "bench/case_isolation.h"

#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "backends/files.h"
#include "backends/host/host_info.h"

extern char** environ;

namespace tb {
namespace fs = std::filesystem;

namespace {

// The journal's files: the report so far, the running case and its stage, the stack a fatal
// signal left, and the signal (written by the parent).
constexpr const char* kReportFile = "report.json";
constexpr const char* kCaseFile = "case.json";
constexpr const char* kStageFile = "stage";
constexpr const char* kStackFile = "stack";
constexpr const char* kSignalFile = "signal";

// What a library's crash looks like; SIGKILL is the out-of-memory killer's.
constexpr std::array kCaseEndingSignals = {SIGFPE, SIGSEGV, SIGILL, SIGBUS, SIGABRT, SIGKILL};
// What the handler catches: SIGKILL cannot be caught.
constexpr std::array kHandledSignals = {SIGFPE, SIGSEGV, SIGILL, SIGBUS, SIGABRT};

// The journal's stack file, for the signal handler: a handler reaches only globals. Set once,
// before the first case, and never changed.
int stack_fd = -1;
// Set by the first thread that takes a fatal signal: threads that fault with it (a library's
// OpenMP team) wait for it to write its stack and end the process.
std::atomic<bool> crashing{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the handler needs a lock-free flag");

extern "C" void write_stack_and_die(int signal) {
  if (!crashing.exchange(true)) {
    void* frames[64];
    const int count = backtrace(frames, 64);
    backtrace_symbols_fd(frames, count, stack_fd);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(signal, &default_action, nullptr);
    raise(signal);  // the default action now: the process dies of the signal
  }
  for (;;) pause();
}

// The supervising parent's running child, for its SIGINT / SIGTERM handler; 0 when none.
volatile sig_atomic_t running_child = 0;

// A Ctrl-C or a timeout's SIGTERM at the parent goes to the run; the parent then sees the run
// end by that signal, removes the journal and exits as the signal says.
extern "C" void forward_to_child(int signal) {
  if (running_child > 0) kill(running_child, signal);
}

// Removes the journal's folder however supervise_run ends.
// Replaces `path` whole (write then rename): a reader after a crash sees the old or the new
// text, never half. No sync: the files outlive the process, not the machine.
void replace_file(const fs::path& path, std::string_view text) {
  const fs::path temporary = path.string() + ".new";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush())
      throw std::runtime_error(fmt::format("cannot write the case journal {}", temporary.string()));
  }
  fs::rename(temporary, path);
}

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// What an interrupted run left of its report: the journal's copy has every finished case
// (saved after each), and the report file has them unless a write failed (a full disk), when
// the copy is saved beside the temporary folder's other files and named.
std::string report_after_interruption(const fs::path& journal_copy,
                                      const std::string& report_path) {
  const auto journaled = read_text(journal_copy);
  const nlohmann::json report =
      journaled ? nlohmann::json::parse(*journaled, nullptr, false) : nlohmann::json();
  const std::size_t finished =
      report.is_object() && report.contains("results") && report["results"].is_array()
          ? report["results"].size()
          : 0;
  if (finished == 0) return fmt::format("no case had finished, so {} was not written", report_path);
  const auto written = read_text(report_path);
  const nlohmann::json on_disk =
      written ? nlohmann::json::parse(*written, nullptr, false) : nlohmann::json();
  const std::string cases =
      fmt::format("the {} case{} finished before it", finished, finished == 1 ? "" : "s");
  // A report in Google Benchmark's format (--format gbench) has its own layout: trusted.
  const bool holds_them = on_disk.is_object() &&
                          (!on_disk.contains("results") || on_disk["results"] == report["results"]);
  if (holds_them)
    return fmt::format("{} {} in {}", cases, finished == 1 ? "is" : "are", report_path);
  const fs::path saved =
      fs::path(temporary_folder()) / fmt::format("trainbench-interrupted-{}.json", getpid());
  std::error_code failed;
  fs::copy_file(journal_copy, saved, fs::copy_options::overwrite_existing, failed);
  if (failed)
    return fmt::format("{} could not be kept: {} misses them and {}: {}", cases, report_path,
                       saved.string(), failed.message());
  return fmt::format("{} {} in {} ({} misses them)", cases, finished == 1 ? "is" : "are",
                     saved.string(), report_path);
}

// " during case 2 of 5 (DESCRIPTOR on BACKEND), 41 s into its validation": what the run was
// doing when a signal ended it, from the journal (the stage file is rewritten as each stage
// begins, so its time is the stage's start); empty between cases.
std::string where_the_run_was(const fs::path& folder) {
  const auto running = read_text(folder / kCaseFile);
  const nlohmann::json item =
      running ? nlohmann::json::parse(*running, nullptr, false) : nlohmann::json();
  if (!item.is_object() || !item["index"].is_number_unsigned() ||
      !item["cases"].is_number_unsigned() || !item["descriptor"].is_string() ||
      !item["backend"].is_string())
    return "";
  std::string where =
      fmt::format(" during case {} of {} ({} on {})", item["index"].get<std::size_t>() + 1,
                  item["cases"].get<std::size_t>(), item["descriptor"].get<std::string>(),
                  item["backend"].get<std::string>());
  const auto stage = read_text(folder / kStageFile);
  std::error_code unknown;
  const auto started = fs::last_write_time(folder / kStageFile, unknown);
  if (!stage || unknown) return where;
  const double seconds =
      std::chrono::duration<double>(fs::file_time_type::clock::now() - started).count();
  return where + fmt::format(", {:.0f} s into its {}", std::max(seconds, 0.0), *stage);
}

bool ends_a_case(int signal) {
  return std::find(kCaseEndingSignals.begin(), kCaseEndingSignals.end(), signal) !=
         kCaseEndingSignals.end();
}

// Runs argv[0]'s binary (this one) with the journal named in its environment; returns
// waitpid's status.
int run_journaled_child(const std::vector<char*>& argv, const std::string& folder) {
  std::vector<std::string> variables;
  for (char** entry = environ; entry && *entry; ++entry)
    if (!std::string_view(*entry).starts_with(std::string(kCaseJournalVariable) + "="))
      variables.emplace_back(*entry);
  variables.push_back(fmt::format("{}={}", kCaseJournalVariable, folder));
  std::vector<char*> envp;
  for (std::string& variable : variables) envp.push_back(variable.data());
  envp.push_back(nullptr);

  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0)
    throw std::runtime_error(fmt::format("cannot start the run: {}", std::strerror(errno)));
  if (pid == 0) {
    // Whatever ends the parent (a timeout's SIGTERM, say) ends the run it started.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    sched_setaffinity(0, sizeof(cpu_set_t), &cpu::process_cpus());
    execve(self.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  running_child = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  running_child = 0;
  return status;
}

}  // namespace

std::string signal_description(int signal) {
  const char* name = sigabbrev_np(signal);
  const char* description = sigdescr_np(signal);
  return fmt::format("SIG{} ({})", name ? name : std::to_string(signal).c_str(),
                     description ? description : "unknown signal");
}

CrashSite crash_site(const std::vector<std::string>& stack, const std::string& executable) {
  // "/usr/lib/x86_64-linux-gnu/libdnnl.so.3(dnnl_..._create+0x41) [0x7f...]" or "(+0x1a2b)".
  auto object_of = [](const std::string& frame) { return frame.substr(0, frame.find('(')); };
  auto function_of = [](const std::string& frame) {
    const auto open = frame.find('(');
    if (open == std::string::npos) return std::string();
    const auto end = frame.find_first_of("+)", open);
    return end == std::string::npos ? std::string() : frame.substr(open + 1, end - open - 1);
  };
  // glibc names the main program as it was started (argv[0]): compared as a file.
  auto is_executable = [&](const std::string& object) {
    std::error_code unknown;
    return object == executable || fs::equivalent(object, executable, unknown);
  };
  auto runtime = [&](const std::string& object) {
    const std::string name = fs::path(object).filename().string();
    for (const char* prefix : {"libc.so", "libm.so", "libpthread", "libgcc_s", "libstdc++",
                               "ld-linux", "libasan", "libubsan", "linux-vdso"})
      if (name.starts_with(prefix)) return true;
    return name.empty() || is_executable(object);
  };
  // "[0x7f...]": code generated at run time (oneDNN's JIT kernels), in no file; the library
  // is the first file-backed frame that called it.
  auto generated = [](const std::string& object) { return object.starts_with("["); };
  CrashSite site;
  std::size_t frame = 0;
  while (frame < stack.size() && runtime(object_of(stack[frame]))) ++frame;
  for (; frame < stack.size() && generated(object_of(stack[frame])); ++frame)
    site.in_generated_code = true;
  if (frame == stack.size() || runtime(object_of(stack[frame]))) return site;
  const std::string library = object_of(stack[frame]);
  site.library = fs::path(library).filename().string();
  for (; frame < stack.size() && object_of(stack[frame]) == library; ++frame)
    if (std::string function = function_of(stack[frame]); !function.empty()) {
      site.function = std::move(function);
      break;
    }
  return site;
}

int supervise_run(char** argv, const std::vector<std::string>& extra_arguments,
                  const std::string& report_path, std::ostream& progress) {
  std::string folder_template =
      (fs::path(writable_temporary_folder()) / "trainbench-journal-XXXXXX").string();
  if (!mkdtemp(folder_template.data()))
    throw std::runtime_error(
        fmt::format("cannot make the case journal's folder: {}", std::strerror(errno)));
  const FolderRemover remover{folder_template};
  const fs::path& folder = remover.folder;
  std::vector<std::string> extra = extra_arguments;
  std::vector<char*> child_argv;
  for (char** argument = argv; *argument; ++argument) child_argv.push_back(*argument);
  for (std::string& argument : extra) child_argv.push_back(argument.data());
  child_argv.push_back(nullptr);
  struct sigaction forward {};
  forward.sa_handler = forward_to_child;
  sigemptyset(&forward.sa_mask);
  for (const int signal : {SIGINT, SIGTERM}) sigaction(signal, &forward, nullptr);
  std::optional<std::size_t> last_crash;
  for (;;) {
    const int status = run_journaled_child(child_argv, folder.string());
    if (WIFEXITED(status) || !ends_a_case(WTERMSIG(status))) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      fmt::print(progress, "trainbench: error: the run was ended by {}{}; {}\n",
                 signal_description(WTERMSIG(status)), where_the_run_was(folder),
                 report_after_interruption(folder / kReportFile, report_path));
      return 128 + WTERMSIG(status);
    }
    const int signal = WTERMSIG(status);
    const auto running = read_text(folder / kCaseFile);
    std::optional<nlohmann::json> crashed;
    if (running) crashed = nlohmann::json::parse(*running, nullptr, false);
    if (!crashed || crashed->is_discarded() || !(*crashed)["index"].is_number_unsigned() ||
        (last_crash && (*crashed)["index"].get<std::size_t>() <= *last_crash)) {
      fmt::print(progress,
                 "trainbench: error: the run died of {} outside any case; the report keeps "
                 "the cases finished before it\n",
                 signal_description(signal));
      return 1;
    }
    last_crash = (*crashed)["index"].get<std::size_t>();
    replace_file(folder / kSignalFile, std::to_string(signal));
    fmt::print(progress,
               "trainbench: case {} ({} on {}) died of {}; the run goes on in a new process\n",
               *last_crash + 1, (*crashed)["descriptor"].get<std::string>(),
               (*crashed)["backend"].get<std::string>(), signal_description(signal));
    progress.flush();
  }
}

std::optional<CaseJournal> CaseJournal::from_environment() {
  const char* folder = std::getenv(kCaseJournalVariable);
  if (!folder || !*folder) return std::nullopt;
  return CaseJournal(folder);
}

std::optional<CaseCrash> CaseJournal::crash() const {
  const fs::path folder = folder_;
  const auto signal = read_text(folder / kSignalFile);
  if (!signal) return std::nullopt;
  const auto report = read_text(folder / kReportFile);
  const auto running = read_text(folder / kCaseFile);
  if (!report || !running)
    throw std::runtime_error("the case journal lacks the report or the case to resume after");
  const nlohmann::json case_json = nlohmann::json::parse(*running);
  CaseCrash crash;
  crash.report = nlohmann::json::parse(*report);
  crash.index = case_json.at("index").get<std::size_t>();
  crash.cases = case_json.at("cases").get<std::size_t>();
  crash.backend = case_json.at("backend").get<std::string>();
  crash.descriptor = case_json.at("descriptor").get<std::string>();
  crash.stage = read_text(folder / kStageFile).value_or("unknown");
  crash.signal = std::stoi(*signal);
  std::istringstream stack(read_text(folder / kStackFile).value_or(""));
  for (std::string line; std::getline(stack, line);)
    if (!line.empty()) crash.stack.push_back(line);
  // The handler's own frame and the kernel's signal trampoline come first.
  const std::size_t handler_frames = std::min<std::size_t>(crash.stack.size(), 2);
  crash.stack.erase(crash.stack.begin(), crash.stack.begin() + handler_frames);
  return crash;
}

void CaseJournal::install_crash_handler() const {
  stack_fd = ::open((fs::path(folder_) / kStackFile).c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (stack_fd < 0) return;  // the crash is still caught by the parent, without its stack
  void* frames[1];
  backtrace(frames, 1);  // loads the unwinder now: the handler must not load a library
  // A stack of its own, so that a stack overflow's SIGSEGV still writes the stack.
  constexpr std::size_t kHandlerStack = 64 * 1024;
  static std::vector<char> handler_stack(kHandlerStack);
  stack_t alternate{};
  alternate.ss_sp = handler_stack.data();
  alternate.ss_size = handler_stack.size();
  sigaltstack(&alternate, nullptr);
  struct sigaction action {};
  action.sa_handler = write_stack_and_die;
  action.sa_flags = SA_NODEFER | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (const int signal : kHandledSignals) sigaction(signal, &action, nullptr);
}

void CaseJournal::begin_case(std::size_t index, std::size_t cases, std::string_view backend,
                             std::string_view descriptor) const {
  const nlohmann::json running = {
      {"index", index}, {"cases", cases}, {"backend", backend}, {"descriptor", descriptor}};
  replace_file(fs::path(folder_) / kStageFile, "starting");
  replace_file(fs::path(folder_) / kCaseFile, running.dump());
}

void CaseJournal::stage(std::string_view stage) const {
  replace_file(fs::path(folder_) / kStageFile, stage);
}

void CaseJournal::end_case() const {
  std::error_code ignored;
  fs::remove(fs::path(folder_) / kCaseFile, ignored);
}

void CaseJournal::save_report(const nlohmann::json& report) const {
  replace_file(fs::path(folder_) / kReportFile, report.dump());
}

}  // namespace tb
