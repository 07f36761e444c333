#include "bench/runner.h"

#include <unistd.h>
#include <algorithm>

#include <chrono>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "backends/host/host_info.h"
#include "backends/seeded.h"
#include "bench/case_isolation.h"
#include "bench/inventory.h"
#include "bench/ranks.h"
#include "reports/result_record.h"
#include "workloads/registry.h"

namespace tb {

std::uint64_t case_seed(std::uint64_t seed, std::string_view descriptor) {
  std::uint64_t hash = 0xcbf29ce484222325;  // FNV-1a, 64 bits
  for (const char c : descriptor) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3;
  return mix64(seed ^ hash);
}

namespace {

struct BackendSlot {
  const BackendEntry* entry = nullptr;
  Availability availability;
  std::unique_ptr<Backend> backend;  // null when not usable here
  std::string broken;                // why it broke during the run (a sticky device error)
  DeviceInfo device;
  std::map<std::string, PeakRate> peaks;
};

struct Case {
  BackendSlot* slot;
  std::unique_ptr<Workload> workload;
  std::string descriptor;  // canonical
};

std::string format_duration(double seconds) {
  const int total = static_cast<int>(seconds + 0.5);
  return fmt::format("{}:{:02d}", total / 60, total % 60);
}

// A status as the case's outcome: what the backend lacks is unimplemented; what this machine
// lacks (memory, a usable backend) is skipped; anything else failed.
void end_with(const Status& status, CaseResult* result) {
  CaseStatus outcome = CaseStatus::failed;
  switch (status.reason_code()) {
    case ReasonCode::unimplemented:
    case ReasonCode::dtype_unsupported:
    case ReasonCode::isa_lacking:
    case ReasonCode::reference_kernels:
      outcome = CaseStatus::unimplemented;
      break;
    case ReasonCode::not_enough_memory:
    case ReasonCode::backend_unusable:
      outcome = CaseStatus::skipped;
      break;
    default:
      break;
  }
  result->end(outcome, status.reason_code(), status.message());
}

CaseMetrics compute_metrics(const WorkCounts& counts, double seconds, DType dtype,
                            const BackendSlot& slot) {
  CaseMetrics metrics;
  if (counts.flops > 0) {
    metrics.flops = counts.flops;
    metrics.tflops = counts.flops / seconds / 1e12;
    const auto peak = slot.peaks.find(std::string(dtype_name(dtype)));
    if (peak != slot.peaks.end()) {
      const double gflops = counts.flops / seconds / 1e9;
      if (peak->second.measured_gflops) {
        metrics.percent_of_peak = 100 * gflops / *peak->second.measured_gflops;
        metrics.above_measured_peak = *metrics.percent_of_peak > 100;
      }
      if (peak->second.theoretical_gflops)
        metrics.percent_of_theoretical_peak = 100 * gflops / *peak->second.theoretical_gflops;
    }
  }
  if (counts.bytes > 0) {
    metrics.bytes = counts.bytes;
    metrics.gbps = counts.bytes / seconds / 1e9;
  }
  if (counts.items > 0) metrics.samples_per_s = counts.items / seconds;
  if (counts.tokens > 0) metrics.tokens_per_s = counts.tokens / seconds;
  if (counts.collective_bytes > 0) {
    metrics.seconds = seconds;
    metrics.algbw_gbps = counts.collective_bytes / seconds / 1e9;
    metrics.busbw_gbps = *metrics.algbw_gbps * counts.bus_factor;
  }
  return metrics;
}

}  // namespace

void account_for_breakage(const std::string& broken_now, std::string* broken_before,
                          CaseResult* result) {
  if (broken_now.empty() || !broken_before->empty()) return;
  *broken_before = broken_now;
  if (result->status == CaseStatus::failed) return;  // it failed already, with its own reason
  result->end(CaseStatus::failed, ReasonCode::backend_broken,
              fmt::format("the backend broke during this case: {}", broken_now));
  result->samples_s.clear();  // a failed case is never reported as a speed
  result->stats.reset();
  result->metrics.reset();
}

namespace {

// "conv backward (ref:any) 12% of the time; ...", the first few ops by name.
std::string reference_kernel_summary(const std::vector<ReferenceKernelUse>& uses) {
  constexpr std::size_t kNamed = 3;
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < uses.size() && i < kNamed; ++i)
    parts.push_back(fmt::format(
        "{} ({}){}", uses[i].op, uses[i].implementation,
        uses[i].share_of_time ? fmt::format(" {:.1f}% of the time", 100 * *uses[i].share_of_time)
                              : ""));
  if (uses.size() > kNamed) parts.push_back(fmt::format("and {} more ops", uses.size() - kNamed));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// Whether `ok` holds on every rank. Each step of a case that can end it early is agreed so: a
// rank that stopped while its peers went on to a collective (a data-parallel step's
// validation or timing) would leave them waiting for it.
bool on_every_rank(World& world, bool ok) {
  return world.size() == 1 ? ok : world.max(ok ? 0.0 : 1.0) == 0.0;
}

// Where another rank ended the case: this rank stops there too, saying so.
void stopped_by_another_rank(const char* stage, CaseResult* result) {
  if (!result->reason.empty()) return;
  result->end(CaseStatus::failed, ReasonCode::rank_failed,
              fmt::format("stopped at {}: another rank failed there (see its line)", stage));
}

// Why the case's backend cannot take it (skipped); ok where it can.
Status backend_unusable(const Case& item) {
  const std::string& name = item.slot->entry->name;
  if (!item.slot->backend)
    return Status::Unavailable(
        fmt::format("backend {} is not usable here: {}", name, item.slot->availability.reason));
  if (!item.slot->broken.empty())
    return Status::Unavailable(
               fmt::format("backend {} broke during an earlier case: {}", name, item.slot->broken))
        .because(ReasonCode::backend_broken);
  return Status::Ok();
}

// Why the case does not fit in host memory (skipped); ok where it does (or runs on a device).
Status memory_shortfall(const Case& item) {
  const std::uint64_t needed = item.workload->device_bytes();
  const std::uint64_t available = cpu::memory_available_bytes();
  if (item.slot->device.kind != "cpu" || needed <= available) return Status::Ok();
  return Status::OutOfMemory(
      fmt::format("does not fit in memory: needs {:.2f} GiB, {:.2f} GiB available",
                  needed / double(1 << 30), available / double(1 << 30)));
}

// What a case's memory is measured against, begun before its set-up: the process's resident
// memory, the allocator's peak from here, and the device's free memory.
CaseMemory begin_memory_account(Backend& backend) {
  CaseMemory memory;
  memory.resident_start_bytes = cpu::resident_memory().now_bytes;
  memory.resident_peak_reset = cpu::reset_resident_peak();
  backend.reset_memory_peak();
  if (const std::optional<MemoryUse> use = backend.memory_use())
    memory.device_free_before_bytes = use->device_free_bytes;
  return memory;
}

// As the timed runs start: the peaks over set-up and validation are kept, and both restart
// from what is held now.
void begin_timed_memory(CaseMemory& memory, Backend& backend) {
  if (const std::optional<MemoryUse> use = backend.memory_use())
    memory.allocated_peak_bytes = use->allocated_peak_bytes;
  if (memory.resident_peak_reset)
    memory.validation_resident_peak_bytes = cpu::resident_memory().peak_bytes;
  backend.reset_memory_peak();
  memory.resident_peak_reset = cpu::reset_resident_peak();
}

// After the timed runs: the peaks against the workload's computed footprint.
CaseMemory end_memory_account(CaseMemory memory, const Backend& backend, const Workload& workload,
                              const DeviceInfo& device) {
  memory.computed_bytes = workload.device_bytes();
  memory.resident_peak_bytes = cpu::resident_memory().peak_bytes;
  memory.device_is_host = device.kind == "cpu";
  if (const std::optional<MemoryUse> use = backend.memory_use()) {
    memory.timed_allocated_peak_bytes = use->allocated_peak_bytes;
    memory.allocated_peak_bytes =
        std::max(memory.allocated_peak_bytes.value_or(0), use->allocated_peak_bytes);
    memory.allowance_bytes = use->allowance_bytes;
    memory.device_free_after_bytes = use->device_free_bytes;
  }
  flag_memory(memory);
  return memory;
}

// The case's energy from its telemetry, with its headline per joule.
std::optional<CaseEnergy> energy_of(const CaseResult& result, const nlohmann::json& telemetry) {
  const std::optional<HeadlineValue> headline = result_headline(to_json(result));
  return case_energy(telemetry, result.headline,
                     headline ? std::optional<double>(headline->value) : std::nullopt);
}

// A passed case's samples, statistics, metrics and details; `telemetry`: what the device's
// monitor saw (null without one).
void record_measurement(const Measurement& measurement, const Workload& workload,
                        const BackendSlot& slot, const nlohmann::json* telemetry,
                        CaseResult* result) {
  result->samples_s = measurement.samples_s;
  result->units_per_sample = measurement.units_per_sample;
  result->warmup_runs = measurement.warmup_runs;
  result->stats = summarize(result->samples_s);
  result->metrics =
      compute_metrics(workload.counts(), result->stats->median, workload.dtype(), slot);
  result->details = workload.details();
  result->reference_kernels = workload.reference_kernels();  // now with their time shares
  if (telemetry) result->details["device_telemetry"] = *telemetry;
  result->end(CaseStatus::passed, ReasonCode::none, "");
  result->energy = energy_of(*result, telemetry ? *telemetry : nlohmann::json());
}

// A case's stages as they begin: each one's wall time, and the journal (where the run keeps one)
// told its name, so that a crash or a time limit can say which stage it came in.
class StageClock {
 public:
  explicit StageClock(const CaseJournal* journal) : journal_(journal) {}
  void begin(CaseStage stage) {
    stop();
    if (journal_) journal_->stage(case_stage_name(stage));
    current_ = stage, start_ = std::chrono::steady_clock::now();
  }
  // Ends the current stage; the seconds of each stage reached.
  const StageSeconds& stop() {
    if (current_)
      seconds_[static_cast<std::size_t>(*current_)] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    current_.reset();
    return seconds_;
  }

 private:
  const CaseJournal* journal_;
  std::optional<CaseStage> current_;
  std::chrono::steady_clock::time_point start_;
  StageSeconds seconds_;
};

// Set up, validate, break down and measure one case, each stage begun on `clock`. Never throws.
CaseResult run_stages(Case& item, const RunOptions& options, World& world, std::uint64_t seed,
                      StageClock& clock) {
  auto stage = [&clock](CaseStage name) { clock.begin(name); };
  CaseResult result;
  result.workload = item.descriptor;
  result.backend = item.slot->entry->name;
  result.dtype = dtype_name(item.workload->dtype());
  result.headline = item.workload->headline();
  if (const Status unusable = backend_unusable(item); !unusable.ok()) {
    result.end(CaseStatus::skipped, unusable.reason_code(), unusable.message());
    return result;
  }
  Backend& backend = *item.slot->backend;
  Workload& workload = *item.workload;
  try {
    const Status fits = memory_shortfall(item);
    if (!fits.ok()) end_with(fits, &result);
    if (!on_every_rank(world, fits.ok())) {
      stopped_by_another_rank("the memory check", &result);
      return result;
    }
    workload.join(world);
    CaseMemory memory = begin_memory_account(backend);
    stage(CaseStage::setup);
    Status status = workload.setup(backend, seed);
    result.implementation = workload.implementation();
    result.math_mode = workload.math_mode();
    result.bf16_emulated = workload.emulates_bf16();
    if (!status.ok()) end_with(status, &result);
    if (!on_every_rank(world, status.ok())) {
      stopped_by_another_rank("set-up", &result);
      return result;
    }
    // Decided at plan time: a reference kernel can take minutes per unit, and its speed is
    // not the library's.
    result.reference_kernels = workload.reference_kernels();
    if (!result.reference_kernels.empty() && !options.allow_reference_kernels) {
      result.end(CaseStatus::unimplemented, ReasonCode::reference_kernels,
                 fmt::format("not timed: {} would run reference kernels ({}); "
                             "--allow-reference-kernels times it, flagged",
                             result.backend, reference_kernel_summary(result.reference_kernels)));
      return result;
    }
    stage(CaseStage::validation);
    result.validation = workload.validate();
    if (!result.validation->passed)
      result.end(CaseStatus::failed, ReasonCode::validation_failed,
                 "validation failed: " + result.validation->message);
    if (!on_every_rank(world, result.validation->passed)) {
      stopped_by_another_rank("validation", &result);
      return result;
    }
    stage(CaseStage::breakdown);
    status = workload.time_breakdown();
    if (!status.ok()) end_with(status.with_prefix("breakdown: "), &result);
    if (!on_every_rank(world, status.ok())) {
      stopped_by_another_rank("the breakdown", &result);
      return result;
    }
    Measurement measurement;
    begin_timed_memory(memory, backend);
    std::unique_ptr<TelemetryMonitor> telemetry = backend.start_telemetry();
    status = measure(workload, backend, options.harness, &measurement, &world,
                     [&](std::string_view phase) {
                       stage(phase == "warm-up" ? CaseStage::warmup : CaseStage::timing);
                     });
    const nlohmann::json telemetry_seen = telemetry ? telemetry->finish() : nlohmann::json();
    result.memory = end_memory_account(memory, backend, workload, item.slot->device);
    if (!status.ok()) {
      end_with(status, &result);
      result.details = workload.details();  // what a failed run learned (a curve) is kept
      return result;
    }
    record_measurement(measurement, workload, *item.slot, telemetry ? &telemetry_seen : nullptr,
                       &result);
  } catch (const std::exception& e) {
    result.end(CaseStatus::failed, ReasonCode::error, e.what());
  }
  return result;
}

CaseResult run_case(Case& item, const RunOptions& options, World& world, std::uint64_t seed,
                    const CaseJournal* journal) {
  StageClock clock(journal);
  CaseResult result = run_stages(item, options, world, seed, clock);
  result.stage_seconds = clock.stop();
  return result;
}

// "setup 1.2 s, validation 14.8 s, ...": the stages reached, in order.
std::string stage_summary(const StageSeconds& seconds) {
  std::vector<std::string> parts;
  for (const CaseStage stage : kCaseStages)
    if (const std::optional<double>& s = seconds[static_cast<std::size_t>(stage)])
      parts.push_back(fmt::format("{} {:.1f} s", case_stage_name(stage), *s));
  return parts.empty() ? "no stage" : fmt::format("{}", fmt::join(parts, ", "));
}

// "passed (ref)": timed with reference kernels; "passed (emu)": bf16 emulated.
std::string status_with_marks(const CaseResult& r) {
  std::string status(case_status_name(r.status));
  if (r.status != CaseStatus::passed) return status;
  if (!r.reference_kernels.empty()) status += " (ref)";
  if (r.bf16_emulated) status += " (emu)";
  return status;
}

void print_header(std::ostream& table) {
  fmt::print(table, "{:<11} {:<13} {:>11} {:>9} {:>9} {:>7} {:>7}  {}\n", "backend", "status",
             "median", "TFLOP/s", "GB/s", "%peak", "%theor", "workload");
}

void print_row(std::ostream& table, const CaseResult& r) {
  auto number = [](const std::optional<double>& value, const char* format) {
    return value ? fmt::format(fmt::runtime(format), *value) : std::string("-");
  };
  const std::string median = r.stats ? fmt::format("{:.4g} ms", r.stats->median * 1e3) : "-";
  const CaseMetrics metrics = r.metrics.value_or(CaseMetrics{});
  // A collective's GB/s is its bus bandwidth (its headline), in 3 digits from 8 bytes up.
  const std::string gbps =
      metrics.busbw_gbps ? number(metrics.busbw_gbps, "{:.3g}") : number(metrics.gbps, "{:.1f}");
  fmt::print(table, "{:<11} {:<13} {:>11} {:>9} {:>9} {:>7} {:>7}  {}\n", r.backend,
             status_with_marks(r), median, number(metrics.tflops, "{:.3f}"), gbps,
             number(metrics.percent_of_peak, metrics.above_measured_peak ? "{:.1f}!" : "{:.1f}"),
             number(metrics.percent_of_theoretical_peak, "{:.1f}"), r.workload);
  if (r.status != CaseStatus::passed) fmt::print(table, "{:<11} ^ {}\n", "", r.reason);
  if (r.status == CaseStatus::passed && !r.reference_kernels.empty())
    fmt::print(table, "{:<11} ^ reference kernels: {}\n", "",
               reference_kernel_summary(r.reference_kernels));
  if (r.bf16_emulated)
    fmt::print(table,
               "{:<11} ^ bf16 emulated or converted to fp32: the CPU (or its ISA cap) lacks "
               "AVX512_BF16\n",
               "");
  if (metrics.above_measured_peak)
    fmt::print(table,
               "{:<11} ^ above the measured {} peak (!): the peak probe fell short of the "
               "instruction's throughput here, or the case's FLOP count is wrong\n",
               "", r.dtype);
  table.flush();
}

// The parent's settings and cases, as arguments for a child `trainbench run`.
std::vector<std::string> child_arguments(const RunOptions& options) {
  const HarnessConfig& h = options.harness;
  std::vector<std::string> arguments = {"--threads",
                                        std::to_string(options.backend_config.threads),
                                        "--pin",
                                        std::string(pin_policy_name(options.backend_config.pin)),
                                        "--seed",
                                        std::to_string(options.seed),
                                        "--warmup",
                                        std::to_string(h.warmup_runs),
                                        "--warmup-time",
                                        fmt::format("{}", h.warmup_seconds),
                                        "--min-reps",
                                        std::to_string(h.min_repetitions),
                                        "--max-reps",
                                        std::to_string(h.max_repetitions),
                                        "--time-budget",
                                        fmt::format("{}", h.time_budget_seconds),
                                        "--min-sample-time",
                                        fmt::format("{}", h.min_sample_seconds)};
  if (h.flush_caches) arguments.push_back("--flush-caches");
  if (options.allow_reference_kernels) arguments.push_back("--allow-reference-kernels");
  for (const Descriptor& descriptor : options.cases)
    arguments.insert(arguments.end(), {"-w", descriptor.to_string()});
  return arguments;
}

// Runs one backend in a child with a changed environment and merges its results, relabelled
// with the environment, into the report. Returns how many of its cases did not pass or skip
// cleanly (failed, or skipped for another reason than memory: the backend is unusable).
int merge_child_run(const ChildEnvironment& environment, const RunOptions& options,
                    ReportWriter& writer, std::ostream& table, std::ostream& progress) {
  const std::string label = environment.label();
  fmt::print(progress, "running {} in a child process\n", label);
  progress.flush();
  table.flush();
  const ChildOutcome outcome = run_child(environment, child_arguments(options),
                                         fmt::format("{}.child.{}", options.out_path, getpid()));
  int problems = 0;
  if (!outcome.report) {
    for (const Descriptor& descriptor : options.cases) {
      CaseResult result;
      result.workload = descriptor.to_string();
      result.backend = label;
      result.dtype = descriptor.get("dtype").value_or("f32");
      result.end(CaseStatus::failed, ReasonCode::child_run_failed, outcome.error);
      writer.add(result);
      print_row(table, result);
      ++problems;
    }
    return problems;
  }
  nlohmann::json backends = writer.report()["backends"];
  for (nlohmann::json block : (*outcome.report)["backends"]) {
    block["name"] = label;
    block["variant_of"] = environment.backend;
    block["environment"] = (*outcome.report)["host"]["environment"];
    backends.push_back(std::move(block));
  }
  writer.set("backends", backends);
  for (nlohmann::json result : (*outcome.report)["results"]) {
    result["backend"] = label;
    const ResultRecord record = read_result(result);
    problems += record.status == CaseStatus::failed ||
                (record.status == CaseStatus::skipped &&
                 record.reason_code != ReasonCode::not_enough_memory);
    writer.add(std::move(result));
  }
  return problems;
}

// The requested backends, each with its probe's answer; an unknown name is a UsageError.
std::vector<BackendSlot> find_backend_slots(const RunOptions& options) {
  std::vector<BackendSlot> slots;
  for (const std::string& name : options.backends) {
    const BackendEntry* entry = find_backend(name);
    if (!entry) {
      std::vector<std::string> known;
      for (const BackendEntry& e : backend_registry()) known.push_back(e.name);
      throw UsageError(
          fmt::format("unknown backend '{}' (this build has: {})", name, fmt::join(known, ", ")));
    }
    slots.push_back({entry, entry->probe(), nullptr, {}, {}, {}});
  }
  return slots;
}

// The report's header: the tool, the run's settings and the host inventory.
nlohmann::json report_header(const RunOptions& options) {
  return {{"schema_version", kReportSchemaVersion},
          {"tool", tool_json()},
          {"started_at", utc_now()},
          {"finished_at", nullptr},
          {"command", options.command_line},
          {"settings",
           {{"threads", options.backend_config.threads},
            {"pin", pin_policy_name(options.backend_config.pin)},
            {"seed", options.seed},
            {"suite", options.suite ? nlohmann::json(*options.suite) : nlohmann::json(nullptr)},
            {"warmup_runs", options.harness.warmup_runs},
            {"warmup_seconds", options.harness.warmup_seconds},
            {"min_repetitions", options.harness.min_repetitions},
            {"max_repetitions", options.harness.max_repetitions},
            {"time_budget_seconds", options.harness.time_budget_seconds},
            {"min_sample_seconds", options.harness.min_sample_seconds},
            {"flush_caches", options.harness.flush_caches}}},
          {"host", host_inventory_json()},
          {"backends", nlohmann::json::array()}};
}

// Creates each usable backend (a GPU backend on its local rank's GPU); one that fails to start
// is unusable with the reason. Across ranks that ends the job: a rank without a backend the
// others run (a GPU fewer than ranks on its host) cannot join their cases.
void create_backends(const RunOptions& options, World& world, const CpuShare& share,
                     std::vector<BackendSlot>& slots) {
  for (BackendSlot& slot : slots) {
    if (!slot.availability.usable) continue;
    BackendConfig config = options.backend_config;
    config.device = world.local_rank();
    config.cpus = share.cpus;
    const Status created = slot.entry->create(config, &slot.backend);
    if (!created.ok()) {
      slot.availability = {false, created.message()};
      slot.backend.reset();
      continue;
    }
    slot.device = slot.backend->device_info();
  }
  for (const BackendSlot& slot : slots)
    if (world.size() > 1 && !slot.backend)
      world.abort(fmt::format("backend {} is not usable here: {}", slot.entry->name,
                              slot.availability.reason),
                  1);
}

// The cases: every requested descriptor, expanded per backend. Across ranks a memory-sized
// expansion (batch=sweep) plans for the least of the ranks' memory, so all get the same cases.
std::vector<Case> make_cases(const RunOptions& options, std::vector<BackendSlot>& slots,
                             World& world) {
  std::vector<Case> cases;
  for (BackendSlot& slot : slots) {
    const std::uint64_t available = static_cast<std::uint64_t>(
        -world.max(-static_cast<double>(memory_for_expansion(slot.device))));
    for (const Descriptor& requested : options.cases)
      for (const Descriptor& descriptor :
           expand_for_backend(requested, slot.backend.get(), available)) {
        std::unique_ptr<Workload> workload = create_workload(descriptor, slot.device);
        std::string canonical = workload->descriptor().to_string();
        cases.push_back({&slot, std::move(workload), std::move(canonical)});
      }
  }
  return cases;
}

// The ranks agree on the cases (else the job ends); the report's world block, at rank 0.
nlohmann::json join_ranks(World& world, const CpuShare& share,
                          const std::vector<BackendSlot>& slots, const std::vector<Case>& cases) {
  std::string plan;
  for (const Case& item : cases) plan += item.slot->entry->name + " " + item.descriptor + "\n";
  require_ranks_agree(world, plan);
  nlohmann::json devices = nlohmann::json::array();
  for (const BackendSlot& slot : slots)
    if (slot.backend)
      devices.push_back({{"backend", slot.entry->name},
                         {"model", slot.device.model},
                         {"threads_used", slot.device.threads_used},
                         {"affinity", slot.device.affinity},
                         {"libraries", to_json(slot.device)["libraries"]}});
  return gather_world_json(world, share, devices);
}

// The report's backends block, with each usable backend's peaks measured now.
nlohmann::json backends_json(const RunOptions& options, std::vector<BackendSlot>& slots) {
  nlohmann::json backends = nlohmann::json::array();
  for (BackendSlot& slot : slots) {
    if (slot.backend) slot.peaks = measure_peaks(*slot.backend, options.peak_harness);
    backends.push_back({{"name", slot.entry->name},
                        {"available", slot.backend != nullptr},
                        {"reason", slot.availability.reason},
                        {"device", slot.backend ? to_json(slot.device) : nlohmann::json(nullptr)},
                        {"peaks", peaks_json(slot.peaks)}});
  }
  return backends;
}

// What a new run says before its first case: backends that cannot run here, a fault a backend
// knows this machine meets, an emulator under the whole run.
void print_run_warnings(const std::vector<BackendSlot>& slots, const nlohmann::json& header,
                        std::ostream& progress) {
  for (const BackendSlot& slot : slots) {
    if (!slot.backend)
      fmt::print(progress, "trainbench: error: backend {} is not usable here: {}\n",
                 slot.entry->name, slot.availability.reason);
    else if (const auto fault = slot.device.details.find("known_fault");
             fault != slot.device.details.end() && fault->is_string())
      fmt::print(progress, "trainbench: warning: {}: {}\n", slot.entry->name,
                 fault->get<std::string>());
  }
  if (const auto& emulation = header["host"]["emulation"]; emulation.is_string())
    fmt::print(progress, "trainbench: {}\n", emulation.get<std::string>());
}

// The result of the case that a fatal signal ended, as the process it killed journaled it.
CaseResult crashed_case_result(const CaseCrash& crash, const Case& item) {
  CaseResult result;
  result.workload = item.descriptor;
  result.backend = item.slot->entry->name;
  result.dtype = dtype_name(item.workload->dtype());
  result.headline = item.workload->headline();
  const CrashSite site =
      crash_site(crash.stack, std::filesystem::read_symlink("/proc/self/exe").string());
  std::string where;
  if (!site.library.empty())
    where = fmt::format(" in {}{} of {}",
                        site.in_generated_code ? "code generated at run time by " : "",
                        site.function.empty() ? "a function" : site.function, site.library);
  else if (!crash.stack.empty())
    where = " in trainbench's own code";
  std::vector<std::string> libraries;
  for (const Library& library : item.slot->device.libraries)
    libraries.push_back(library.version.starts_with(library.name)
                            ? library.version
                            : fmt::format("{} {}", library.name, library.version));
  // A fault the backend knows this machine meets (its device description's known_fault).
  const nlohmann::json& details = item.slot->device.details;
  const std::string known =
      details.contains("known_fault") && details["known_fault"].is_string()
          ? "; known on this machine: " + details["known_fault"].get<std::string>()
          : "";
  result.reason_code = ReasonCode::crashed;
  result.reason =
      fmt::format("died of {} during {}{} ({} runs {}); the run went on in a new process{}",
                  signal_description(crash.signal), crash.stage, where, result.backend,
                  libraries.empty() ? std::string("no named library")
                                    : fmt::format("{}", fmt::join(libraries, ", ")),
                  known);
  constexpr std::size_t kFramesKept = 32;
  const std::vector<std::string> stack(
      crash.stack.begin(), crash.stack.begin() + std::min(crash.stack.size(), kFramesKept));
  result.details = {{"crash",
                     {{"signal", signal_description(crash.signal)},
                      {"signal_number", crash.signal},
                      {"stage", crash.stage},
                      {"library", site.library},
                      {"function", site.function},
                      {"in_generated_code", site.in_generated_code},
                      {"stack", stack}}}};
  return result;
}

// A resumed run goes on only with the cases the crashed process planned.
void check_resumable(const CaseCrash& crash, const std::vector<Case>& cases) {
  if (crash.cases == cases.size() && crash.index < cases.size() &&
      cases[crash.index].descriptor == crash.descriptor &&
      cases[crash.index].slot->entry->name == crash.backend)
    return;
  throw std::runtime_error(fmt::format(
      "cannot go on after case {} ({} on {}) died of {}: this process planned other cases (a "
      "size chosen by free memory changed?); the report keeps the cases finished before it",
      crash.index + 1, crash.descriptor, crash.backend, signal_description(crash.signal)));
}

// Each usable backend's peaks as the crashed process measured them (its report's backends).
void restore_peaks(const nlohmann::json& backends, std::vector<BackendSlot>& slots) {
  for (BackendSlot& slot : slots)
    for (const nlohmann::json& block : backends)
      if (block.value("name", "") == slot.entry->name && block.contains("peaks"))
        slot.peaks = peaks_from_json(block["peaks"]);
}

// Says where the report is once a write has missed its path (a full disk), and when a later
// write reaches the path again; `told` is the failure last told, so each is told once.
void tell_report_writes(const ReportWriter& writer, std::optional<std::string>& told,
                        std::ostream& progress) {
  const std::optional<ReportWriteFailure>& failure = writer.failure();
  if (!failure) {
    if (told)
      fmt::print(progress, "trainbench: the report is written to {} again\n", writer.path());
    told.reset();
    return;
  }
  if (told == failure->reason) return;
  told = failure->reason;
  if (failure->fallback)
    fmt::print(progress,
               "trainbench: warning: {}; the report, every finished case in it, is in {} "
               "until {} can be written\n",
               failure->reason, *failure->fallback, writer.path());
  else
    fmt::print(progress, "trainbench: warning: {}; the finished cases are only in the table\n",
               failure->reason);
  progress.flush();
}

// Where the finished run's report is: its path, the fallback a failed write went to (after an
// error line), or none where no case finished and a file was already there (left as it was).
// `missed`: the path could not be written.
std::string where_the_report_is(const ReportWriter& writer, std::ostream& progress, bool* missed) {
  *missed = false;
  if (const std::optional<ReportWriteFailure>& failure = writer.failure()) {
    *missed = true;
    fmt::print(progress, "trainbench: error: {}\n", failure->reason);
    return failure->fallback ? *failure->fallback + " (not " + writer.path() + ")"
                             : "none (the table above has the finished cases)";
  }
  if (writer.written()) return writer.path();
  return fmt::format("none, no case finished ({} is left as it was)", writer.path());
}

// What the case loop works with.
struct CaseLoop {
  const RunOptions& options;
  World& world;
  std::vector<Case>& cases;
  std::optional<ReportWriter>& writer;  // rank 0's
  const CaseJournal* journal;           // a supervised run's
  std::ostream& table;
  std::ostream& progress;
  std::optional<std::string> told_write_failure = {};  // tell_report_writes's
};

// Runs cases[first...] in order, printing and recording each; returns how many failed.
int run_cases(CaseLoop& loop, std::size_t first) {
  using Clock = std::chrono::steady_clock;
  auto& [options, world, cases, writer, journal, table, progress, told] = loop;
  int failed = 0;
  const auto start = Clock::now();
  StageSeconds spent;  // by the cases so far, stage by stage
  for (std::size_t i = first; i < cases.size(); ++i) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const std::string estimate = i == first
                                     ? "?"
                                     : format_duration(elapsed / static_cast<double>(i - first) *
                                                       static_cast<double>(cases.size() - i));
    const std::string split = i == first ? "" : fmt::format(" ({})", stage_summary(spent));
    fmt::print(progress, "[{}/{}] {} elapsed{}, ~{} left: {} {}\n", i + 1, cases.size(),
               format_duration(elapsed), split, estimate, cases[i].slot->entry->name,
               cases[i].descriptor);
    progress.flush();
    world.set_activity(fmt::format("case {} of {} ({} on {})", i + 1, cases.size(),
                                   cases[i].descriptor, cases[i].slot->entry->name));
    if (journal)
      journal->begin_case(i, cases.size(), cases[i].slot->entry->name, cases[i].descriptor);
    CaseResult result =
        run_case(cases[i], options, world, case_seed(options.seed, cases[i].descriptor), journal);
    cases[i].workload.reset();  // release its memory before the next case allocates
    if (cases[i].slot->backend)
      account_for_breakage(cases[i].slot->backend->broken(), &cases[i].slot->broken, &result);
    gather_case_result(world, &result);
    failed += result.status == CaseStatus::failed;
    if (writer) {
      writer->add(result);
      tell_report_writes(*writer, loop.told_write_failure, progress);
    }
    if (journal && writer) journal->save_report(writer->report());
    if (journal) journal->end_case();
    print_row(table, result);
    if (options.verbose && result.stage_seconds != StageSeconds{})
      fmt::print(table, "{:<11} ^ stages: {}\n", "", stage_summary(result.stage_seconds));
    for (std::size_t s = 0; s < spent.size(); ++s)
      if (result.stage_seconds[s]) spent[s] = spent[s].value_or(0) + *result.stage_seconds[s];
  }
  return failed;
}

}  // namespace

int run_benchmarks(const RunOptions& options, World& world, std::ostream& table_out,
                   std::ostream& progress_out) {
  using Clock = std::chrono::steady_clock;
  std::ostream silent(nullptr);  // ranks other than 0 print only errors
  std::ostream& table = world.rank() == 0 ? table_out : silent;
  std::ostream& progress = world.rank() == 0 ? progress_out : silent;
  // Everything the user asked for is checked before anything runs or is written.
  std::vector<BackendSlot> slots = find_backend_slots(options);
  if (options.cases.empty()) throw UsageError("no workloads to run");
  if (world.size() > 1 && !options.child_environments.empty())
    throw UsageError("--child-env runs one more process: not under a launcher");
  // A supervised run (case_isolation.h) journals its cases; after a crash it goes on from
  // the crashed process's report, past the case that died.
  const std::optional<CaseJournal> journal =
      world.launched() ? std::nullopt : CaseJournal::from_environment();
  const std::optional<CaseCrash> crash = journal ? journal->crash() : std::nullopt;
  if (journal) journal->install_crash_handler();

  nlohmann::json header = crash ? crash->report : report_header(options);
  const CpuShare share = rank_cpu_share(world);
  create_backends(options, world, share, slots);
  std::vector<Case> cases = make_cases(options, slots, world);
  if (crash) check_resumable(*crash, cases);
  header["world"] = join_ranks(world, share, slots, cases);

  std::optional<ReportWriter> writer;  // rank 0's
  if (world.rank() == 0) {
    try {
      writer.emplace(options.out_path, options.format, header);  // proves the path is writable
    } catch (const ReportError& e) {
      throw UsageError(e.what());
    }
  }
  CaseLoop loop{options, world, cases, writer, journal ? &*journal : nullptr, table, progress};
  int failed = 0;
  std::size_t first = 0;
  if (crash) {
    restore_peaks(header["backends"], slots);
    for (const ResultRecord& result : read_results(header))
      failed += result.status == CaseStatus::failed;
    first = crash->index + 1;
    if (header["results"].size() == crash->index) {  // else it ended before the signal came
      const CaseResult result = crashed_case_result(*crash, cases[crash->index]);
      writer->add(result);
      tell_report_writes(*writer, loop.told_write_failure, progress);
      print_row(table, result);
      ++failed;
    }
    // Journaled with the crashed case, so that a crash in the next case does not lose it.
    if (journal && writer) journal->save_report(writer->report());
  } else {
    const nlohmann::json backends = backends_json(options, slots);
    if (writer) writer->set("backends", backends);
    // The report a run that dies in its first case resumes from.
    if (journal && writer) journal->save_report(writer->report());
    print_run_warnings(slots, header, progress);
    print_header(table);
  }
  const auto start = Clock::now();
  failed += run_cases(loop, first);
  bool report_missed = false;
  std::string report_at;
  if (writer) {
    for (const ChildEnvironment& environment : options.child_environments)
      failed += merge_child_run(environment, options, *writer, table, progress);
    writer->finish(utc_now());
    report_at = where_the_report_is(*writer, progress, &report_missed);
  }
  fmt::print(progress, "{} cases in {}, {} failed; report: {}\n", cases.size(),
             format_duration(std::chrono::duration<double>(Clock::now() - start).count()), failed,
             report_at);
  // A backend the user asked for that cannot run here is an error too, after the rest ran.
  const bool unusable =
      std::any_of(slots.begin(), slots.end(), [](const BackendSlot& s) { return !s.backend; });
  const bool broke = std::any_of(slots.begin(), slots.end(),
                                 [](const BackendSlot& s) { return !s.broken.empty(); });
  return failed > 0 || unusable || broke || report_missed ? 1 : 0;
}

}  // namespace tb
