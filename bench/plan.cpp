// `trainbench plan`: prints reports/capacity_plan.h's answer for a model on a device, and with
// --check, its predictions against the measured peaks of a report's model cases.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/report_commands.h"
#include "models/precision.h"
#include "reports/capacity_plan.h"
#include "reports/result_record.h"
#include "workloads/registry.h"
#include "workloads/training_workload.h"

namespace tb {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// The parts of a model workload's step ("bert-train model=large batch=4"); null for a
// descriptor of another kind. Throws UsageError for one that does not parse.
std::optional<TrainingMemory> model_memory(const std::string& descriptor) {
  DeviceInfo device;
  device.kind = "cpu";
  const std::unique_ptr<Workload> workload = create_workload(Descriptor::parse(descriptor), device);
  const auto* model = dynamic_cast<const TrainingWorkload*>(workload.get());
  if (!model) return std::nullopt;
  return model->memory_parts();
}

OptimizerKind parse_optimizer(const std::string& name) {
  if (name == "sgd" || name == "sgd_momentum") return OptimizerKind::sgd_momentum;
  if (name == "adamw") return OptimizerKind::adamw;
  if (name == "lamb") return OptimizerKind::lamb;
  throw UsageError(fmt::format("--optimizer {}: expected sgd, adamw or lamb", name));
}

// A model given by its counts: the parts from the parameter count, dtype and optimizer.
TrainingMemory given_memory(const PlanOptions& o) {
  if (!o.parameters || !o.activation_bytes_per_sample)
    throw UsageError(
        "plan needs -w MODEL_WORKLOAD, or --parameters and "
        "--activation-bytes-per-sample");
  const DType dtype = parse_dtype(o.dtype);
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    throw UsageError(fmt::format("--dtype {}: expected f32, bf16 or f16", o.dtype));
  if (o.batch < 1) throw UsageError("--batch: at least 1");
  const PrecisionPolicy policy = PrecisionPolicy::for_compute(dtype);
  const double master = static_cast<double>(dtype_size(policy.master));
  const double compute = static_cast<double>(dtype_size(policy.compute));
  const double p = *o.parameters;
  TrainingMemory m;
  m.weights = p * master;
  if (policy.mixed()) m.compute_weights = p * compute;
  m.gradients = p * master;
  m.optimizer_state = optimizer_values_per_parameter(parse_optimizer(o.optimizer)) * p * master;
  m.activations = *o.activation_bytes_per_sample * static_cast<double>(o.batch);
  m.activations_recomputed =
      o.recomputed_activation_bytes_per_sample.value_or(0) * static_cast<double>(o.batch);
  if (o.layers > 0) m.largest_layer_weights = p / o.layers * compute;
  return m;
}

// A passed model case of a report with its timed allocator peak, and the model's estimate.
struct MeasuredModelCase {
  const ResultRecord* record;
  TrainingMemory estimate;
  double timed_peak_bytes;
};

std::vector<MeasuredModelCase> measured_model_cases(const std::vector<ResultRecord>& records) {
  std::vector<MeasuredModelCase> cases;
  for (const ResultRecord& record : records) {
    const nlohmann::json& result = *record.json;
    if (!record.passed() || !result.contains("memory") ||
        !result["memory"].contains("timed_allocated_peak_bytes"))
      continue;
    const std::optional<TrainingMemory> estimate = model_memory(record.key.workload);
    if (!estimate) continue;
    cases.push_back(
        {&record, *estimate, result["memory"]["timed_allocated_peak_bytes"].get<double>()});
  }
  return cases;
}

// The activations of a measured case of the same model, scaled from its shape to this one:
// the case's timed allocator peak less its states, times the estimate's ratio.
bool scale_measured_activations(const nlohmann::json& report, const std::string& descriptor,
                                CapacityQuestion* q) {
  const Descriptor target = Descriptor::parse(descriptor);
  const std::vector<ResultRecord> records = read_results(report);
  for (const MeasuredModelCase& c : measured_model_cases(records)) {
    const Descriptor measured = Descriptor::parse(c.record->key.workload);
    if (measured.kind() != target.kind() || measured.get("model") != target.get("model") ||
        c.estimate.activations <= 0)
      continue;
    const double activations = c.timed_peak_bytes - c.estimate.states();
    if (activations <= 0) continue;
    const double calibration = activations / c.estimate.activations;
    q->memory.activations *= calibration;
    q->memory.activations_recomputed *= calibration;
    q->activation_source = fmt::format(
        "measured: {} on {} held {:.2f} GiB, {:.2f} GiB of it activations ({:.2f}x the "
        "estimate), scaled to this shape",
        c.record->key.workload, c.record->key.backend, c.timed_peak_bytes / kGiB,
        activations / kGiB, calibration);
    return true;
  }
  return false;
}

// One device's memory from the report: the first backend whose device says it.
bool report_device(const nlohmann::json& report, CapacityQuestion* q) {
  for (const nlohmann::json& backend : report.value("backends", nlohmann::json::array())) {
    const nlohmann::json device = backend.value("device", nlohmann::json::object());
    const double bytes = device.value("memory_bytes", 0.0);
    if (bytes <= 0) continue;
    q->device_bytes = bytes;
    q->device = fmt::format("{} ({}, from the report)", device.value("model", "device"),
                            backend.value("name", "backend"));
    return true;
  }
  return false;
}

CapacityQuestion question(const PlanOptions& o, const std::optional<nlohmann::json>& report) {
  CapacityQuestion q;
  q.devices = o.devices;
  q.reserve_bytes = o.reserve_gib * kGiB;
  if (o.workload) {
    const std::optional<TrainingMemory> memory = model_memory(*o.workload);
    if (!memory)
      throw UsageError(
          fmt::format("-w '{}': plan takes a model workload (resnet50-train, "
                      "bert-train)",
                      *o.workload));
    q.model = *o.workload;
    q.memory = *memory;
    q.activation_source = "estimated from the network (2.25 copies of every tensor)";
    if (report && !scale_measured_activations(*report, *o.workload, &q))
      q.activation_source += "; the report has no measured case of this model";
  } else {
    q.memory = given_memory(o);
    q.model = fmt::format("{:.3g} B parameters, {}, {}, micro-batch {}", *o.parameters / 1e9,
                          o.dtype, o.optimizer, o.batch);
    q.activation_source = "given per sample";
    q.recomputation_known = o.recomputed_activation_bytes_per_sample.has_value();
  }
  if (o.memory_gib) {
    q.device_bytes = *o.memory_gib * kGiB;
    q.device = "given";
  } else if (!report || !report_device(*report, &q)) {
    throw UsageError("plan needs the device's memory: --memory-gib, or --report with a device");
  }
  if (q.device_bytes <= q.reserve_bytes)
    throw UsageError("the device's memory is no more than the --reserve-gib kept back");
  return q;
}

// The measured fabrics of the report's all-reduce sweeps, then the stated links.
std::vector<Link> links_for(const std::optional<nlohmann::json>& report) {
  std::vector<Link> links;
  if (report) links = project_communication(*report).fabrics;
  for (Link& link : stated_links(links.empty() ? 0.0 : links.front().alpha_s))
    links.push_back(std::move(link));
  return links;
}

int check_command(const PlanOptions& o) {
  const nlohmann::json report = read_input_report(*o.check);
  const std::vector<ResultRecord> records = read_results(report);
  std::vector<PeakCheck> checks;
  for (const MeasuredModelCase& c : measured_model_cases(records))
    checks.push_back(
        {c.record->key.backend, c.record->key.workload, c.estimate.total(), c.timed_peak_bytes});
  if (checks.empty())
    throw UsageError(fmt::format("{}: no passed model case with a measured peak", *o.check));
  const std::string table = peak_check_table(checks).render(o.format);
  std::fwrite(table.data(), 1, table.size(), stdout);
  // Time-to-train cases train a model too, but hold their data set and evaluation besides the
  // step, which plan does not model: named, not passed over in silence.
  for (const ResultRecord& record : records)
    if (record.passed() && Descriptor::parse(record.key.workload).kind().starts_with("ttt-"))
      fmt::print(
          "not checked: {} on {}: a time-to-train run holds its data set and evaluation "
          "besides the step, which plan does not model\n",
          record.key.workload, record.key.backend);
  const bool within = peaks_within_tolerance(checks);
  fmt::print("{}\n", within ? "every prediction within the tolerance"
                            : "a measured peak is outside the tolerance of its prediction");
  return within ? 0 : 1;
}

}  // namespace

int plan_command(const PlanOptions& options) {
  if (options.check) return check_command(options);
  std::optional<nlohmann::json> report;
  if (options.report) report = read_input_report(*options.report);
  const CapacityQuestion q = question(options, report);
  const CapacityAnswer answer = plan_capacity(q);
  const auto print = [&](const std::string& title, const TextTable& table) {
    fmt::print("{}\n{}\n", title, table.render(options.format));
  };
  fmt::print("{} on {} ({} usable)\n\n", q.model, q.device,
             fmt::format("{:.2f} GiB", (q.device_bytes - q.reserve_bytes) / kGiB));
  print("memory per device, replicated", memory_parts_table(q));
  fmt::print("answer: {}\n\n", answer.verdict);
  print("shardings", sharding_table(q, answer));
  print(
      "communication each sharding adds over the replicated step's all-reduce (ring; an "
      "all-gather or reduce-scatter is half an all-reduce; stated links at their raw rate)",
      traffic_table(q, answer, links_for(report)));
  return 0;
}

}  // namespace tb
