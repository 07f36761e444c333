// A library that dies of a fatal signal inside a case (SIGFPE, SIGSEGV, SIGILL, SIGBUS, an
// abort, or SIGKILL from the kernel's out-of-memory killer) ends that case, not the run.
//
// `trainbench run` starts the run again as a child process and waits (supervise_run). The child
// keeps a journal in a private folder: the report so far, the case it is in and at what stage,
// and, written by its signal handler, the stack at a crash. When a fatal signal kills the child,
// the parent starts a new one; it reads the journal, records the case as failed (the signal, the
// library and function it died in, the stage) and goes on with the next case. The report keeps
// every case.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb {

// Names the journal's folder in a supervised run's environment.
inline constexpr const char* kCaseJournalVariable = "TRAINBENCH_CASE_JOURNAL";

// The parent's side: runs `argv` (this binary's command line) and `extra_arguments` (what
// every child must share, such as the report's path) again as a child with a journal, and again
// past each case that dies of a fatal signal. Returns the last child's exit code (1 when a case
// died), or 1 when a child died outside a case. Tells `progress` of each restart. A SIGINT or
// SIGTERM to the parent goes to the child; where that ends it, the parent says what became of
// the report at `report_path`: the cases finished before it, or none and the file untouched.
int supervise_run(char** argv, const std::vector<std::string>& extra_arguments,
                  const std::string& report_path, std::ostream& progress);

// Where a child died, as the next child reads it from the journal.
struct CaseCrash {
  nlohmann::json report;  // the report as it stood when the case began
  std::size_t index = 0;  // the case's position in the run's plan
  std::size_t cases = 0;  // how many cases the plan held
  std::string backend, descriptor, stage;
  int signal = 0;
  std::vector<std::string> stack;  // the handler's frames, innermost first; empty if none
};

// The frame a crash happened in: the innermost file-backed frame outside trainbench itself and
// the C and C++ runtimes (past any run-time generated code, which it notes), and the nearest named
// function of that library (its exported entry point, for a library that hides its internals).
// Empty fields where the stack does not say.
struct CrashSite {
  std::string library;             // "libdnnl.so.3"
  std::string function;            // "dnnl_convolution_backward_data_primitive_desc_create"
  bool in_generated_code = false;  // it died in code generated at run time, called by `library`
};
// `executable`: this binary's path, whose frames are trainbench's own.
CrashSite crash_site(const std::vector<std::string>& stack, const std::string& executable);

// "SIGFPE (arithmetic exception)".
std::string signal_description(int signal);

// The child's side: present where this process is a supervised run.
class CaseJournal {
 public:
  static std::optional<CaseJournal> from_environment();

  // The crash this process resumes after (read once, before install_crash_handler), or none.
  std::optional<CaseCrash> crash() const;
  // Fatal signals write the stack to the journal, then end the process with the signal.
  void install_crash_handler() const;
  // The case now running, of `cases`, and its stage ("set-up", "validation", "timing").
  void begin_case(std::size_t index, std::size_t cases, std::string_view backend,
                  std::string_view descriptor) const;
  void stage(std::string_view stage) const;
  void end_case() const;
  // Keeps the report so far (after each case), for a resumed run to go on from.
  void save_report(const nlohmann::json& report) const;

 private:
  explicit CaseJournal(std::string folder) : folder_(std::move(folder)) {}
  std::string folder_;
};

}  // namespace tb
