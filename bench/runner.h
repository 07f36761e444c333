// `trainbench run`: creates the backends, checks every descriptor before anything runs, then
// for each backend and case: set up, validate, measure, report. A failing case is recorded and
// the run goes on; finished results are on disk after every case.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/communicator.h"
#include "backends/registry.h"
#include "bench/child_run.h"
#include "bench/harness.h"
#include "reports/report.h"
#include "workloads/descriptor.h"

namespace tb {

struct RunOptions {
  std::vector<std::string> backends;
  std::vector<Descriptor> cases;  // shapes already expanded
  std::optional<std::string> suite;
  BackendConfig backend_config;
  HarnessConfig harness;
  // Peaks are the best sample of a short run; the warm-up lets AMX and AVX-512 clocks settle.
  HarnessConfig peak_harness{2, 0.1, 5, 200, 0.3, 1e-3};
  std::uint64_t seed = 42;
  std::string out_path;
  ReportFormat format = ReportFormat::json;
  std::string command_line;
  // Time cases whose plans run reference kernels (flagged) instead of leaving them untimed.
  bool allow_reference_kernels = false;
  // Backends to run again in a child process with a changed environment, after the rest.
  std::vector<ChildEnvironment> child_environments;
  bool verbose = false;  // each case's stage seconds under its row
};

// Folds a backend's health into a case's result: `broken_now` is the backend's broken() after
// the case, `broken_before` what was known before it (updated). The case during which the
// backend broke fails with the reason, whatever it reported; later cases of that backend are
// skipped with it (the runner does not run them).
void account_for_breakage(const std::string& broken_now, std::string* broken_before,
                          CaseResult* result);

// The seed of a case's inputs: --seed mixed with an FNV-1a hash of its canonical descriptor
// line, so a descriptor reproduces its inputs in any suite, at any position, on any backend.
std::uint64_t case_seed(std::uint64_t seed, std::string_view descriptor);

// Exit code: 0 when every case passed or is unimplemented, 1 when any failed or a requested
// backend is not usable here (its cases are recorded as skipped, with the reason), or a
// backend broke during the run.
// Throws UsageError (exit 2) for bad input found before the first case runs and
// ReportError when the report cannot be written.
// Under a launcher every rank calls it with the same options: each runs every case on its own
// devices (collective and data-parallel cases together, through `world`), rank 0 gathers the
// results, prints and writes the report; the others print nothing but errors.
int run_benchmarks(const RunOptions& options, World& world, std::ostream& table,
                   std::ostream& progress);

}  // namespace tb
