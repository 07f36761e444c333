#include "reports/capacity_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tb {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string gib(double bytes) {
  return fmt::format("{:.2f} GiB", bytes / kGiB);
}

constexpr Sharding kShardings[] = {Sharding::replicated, Sharding::zero1, Sharding::zero2,
                                   Sharding::zero3};

bool mixed(const TrainingMemory& m) {
  return m.compute_weights > 0;
}

// Of a device's bytes under `sharding`: what every device keeps whole, and what is split N ways.
struct Split {
  double whole = 0, sharded = 0;
};
Split split_states(const TrainingMemory& m, Sharding sharding) {
  // Mixed precision's fp32 master weights belong to the optimizer's state (ZeRO's accounting).
  const double optimizer = m.optimizer_state + (mixed(m) ? m.weights : 0);
  switch (sharding) {
    case Sharding::replicated:
      return {m.states(), 0};
    case Sharding::zero1:
      return {m.states() - optimizer, optimizer};
    case Sharding::zero2:
      return {m.states() - optimizer - m.gradients, optimizer + m.gradients};
    case Sharding::zero3:
      // The layer computing now and the next one, gathered ahead.
      return {2 * m.largest_layer_weights, m.states()};
  }
  return {};
}

double usable_bytes(const CapacityQuestion& q) {
  return q.device_bytes - q.reserve_bytes;
}

ShardingFit fewest_devices(const CapacityQuestion& q, Sharding sharding, bool recompute) {
  const TrainingMemory& m = q.memory;
  const Split split = split_states(m, sharding);
  const double fixed = split.whole + (recompute ? m.activations_recomputed : m.activations);
  ShardingFit fit{sharding, recompute, std::nullopt,
                  per_device_bytes(m, sharding, recompute, kMaxPlannedDevices)};
  const double room = usable_bytes(q) - fixed;
  if (sharding == Sharding::replicated) {
    if (room < 0) return fit;
    return {sharding, recompute, 1, fixed};
  }
  if (room <= 0) return fit;
  const double needed = std::ceil(split.sharded / room);
  if (needed > kMaxPlannedDevices) return fit;
  const int devices = std::max(1, static_cast<int>(needed));
  return {sharding, recompute, devices, per_device_bytes(m, sharding, recompute, devices)};
}

// The fewest devices over every sharding (ties: the least sharding), with or without
// recomputation; null where none fits.
const ShardingFit* best_fit(const CapacityAnswer& answer, bool recompute) {
  const ShardingFit* best = nullptr;
  for (const ShardingFit& fit : answer.fits)
    if (fit.recompute == recompute && fit.devices && fit.sharding != Sharding::replicated &&
        (!best || *fit.devices < *best->devices))
      best = &fit;
  return best;
}

std::string at_hand(const CapacityQuestion& q, const ShardingFit& fit) {
  if (q.devices <= 0) return "";
  return *fit.devices <= q.devices ? fmt::format("; the {} at hand suffice", q.devices)
                                   : fmt::format("; the {} at hand are too few", q.devices);
}

std::string verdict(const CapacityQuestion& q, const CapacityAnswer& answer) {
  const auto fit_of = [&](Sharding s, bool recompute) -> const ShardingFit& {
    return *std::find_if(answer.fits.begin(), answer.fits.end(), [&](const ShardingFit& f) {
      return f.sharding == s && f.recompute == recompute;
    });
  };
  const ShardingFit& whole = fit_of(Sharding::replicated, false);
  if (whole.devices)
    return fmt::format("fits on one device: {} of {} usable", gib(whole.per_device_bytes),
                       gib(usable_bytes(q)));
  const ShardingFit& recomputed = fit_of(Sharding::replicated, true);
  if (q.recomputation_known && recomputed.devices)
    return fmt::format("fits only with recomputation: {} of {} usable ({} without)",
                       gib(recomputed.per_device_bytes), gib(usable_bytes(q)),
                       gib(whole.per_device_bytes));
  const ShardingFit* plain = best_fit(answer, false);
  const ShardingFit* with = q.recomputation_known ? best_fit(answer, true) : nullptr;
  if (!plain && !with)
    return fmt::format(
        "cannot fit at any N: fully sharded, what each device keeps whole (the activations of "
        "its micro-batch and a gathered layer: {}) exceeds the {} usable; a smaller "
        "micro-batch{} is the way left",
        gib(fit_of(Sharding::zero3, q.recomputation_known).per_device_bytes), gib(usable_bytes(q)),
        q.recomputation_known ? "" : " or recomputation");
  std::string text;
  if (plain)
    text = fmt::format("needs {}-way sharding, {}, {} per device{}", *plain->devices,
                       sharding_name(plain->sharding), gib(plain->per_device_bytes),
                       at_hand(q, *plain));
  if (with && (!plain || *with->devices < *plain->devices))
    text +=
        fmt::format("{}{}-way with recomputation, {}, {} per device{}",
                    text.empty() ? "needs " : "; or ", *with->devices,
                    sharding_name(with->sharding), gib(with->per_device_bytes), at_hand(q, *with));
  return text;
}

}  // namespace

std::string sharding_name(Sharding sharding) {
  switch (sharding) {
    case Sharding::replicated:
      return "replicated (data parallel)";
    case Sharding::zero1:
      return "ZeRO-1 (optimizer state sharded)";
    case Sharding::zero2:
      return "ZeRO-2 (+ gradients)";
    case Sharding::zero3:
      return "ZeRO-3 / FSDP (+ weights)";
  }
  return "";
}

double per_device_bytes(const TrainingMemory& memory, Sharding sharding, bool recompute,
                        int devices) {
  const Split split = split_states(memory, sharding);
  return split.whole + split.sharded / std::max(devices, 1) +
         (recompute ? memory.activations_recomputed : memory.activations);
}

StepTraffic step_traffic(const TrainingMemory& memory, Sharding sharding) {
  const double weights = mixed(memory) ? memory.compute_weights : memory.weights;
  switch (sharding) {
    case Sharding::replicated:
      return {0, 0, 0, memory.gradients};
    case Sharding::zero1:
    case Sharding::zero2:
      return {memory.gradients, weights, 1, 0};
    case Sharding::zero3:
      return {memory.gradients, weights, 2, 0};  // before forward and again before backward
  }
  return {};
}

double traffic_seconds(const StepTraffic& traffic, const Link& link, int devices) {
  if (devices < 2) return 0;
  const auto half_ring = [&](double bytes) {
    return bytes > 0 ? ring_all_reduce_seconds(link, devices, bytes) / 2 : 0.0;
  };
  return (traffic.all_reduce_bytes > 0
              ? ring_all_reduce_seconds(link, devices, traffic.all_reduce_bytes)
              : 0.0) +
         half_ring(traffic.reduce_scatter_bytes) +
         traffic.all_gathers * half_ring(traffic.all_gather_bytes);
}

CapacityAnswer plan_capacity(const CapacityQuestion& question) {
  CapacityAnswer answer;
  for (bool recompute : {false, true})
    for (Sharding sharding : kShardings)
      answer.fits.push_back(fewest_devices(question, sharding, recompute));
  answer.verdict = verdict(question, answer);
  return answer;
}

TextTable memory_parts_table(const CapacityQuestion& q) {
  const TrainingMemory& m = q.memory;
  TextTable table({"part", "bytes", "what"});
  table.add({"weights", gib(m.weights),
             mixed(m) ? "fp32 master weights" : "the parameters, in the training dtype"});
  if (mixed(m)) table.add({"weights (compute copy)", gib(m.compute_weights), "16-bit copy"});
  table.add({"gradients", gib(m.gradients), mixed(m) ? "fp32" : "the training dtype"});
  table.add({"optimizer state", gib(m.optimizer_state), "momentum or two moments"});
  table.add({"activations", gib(m.activations), q.activation_source});
  table.add({"activations, recomputed", q.recomputation_known ? gib(m.activations_recomputed) : "-",
             q.recomputation_known ? "blocks' outputs kept, one block's activations live"
                                   : "not estimated"});
  table.add({"total", gib(m.total()), ""});
  table.add({"device, usable", gib(usable_bytes(q)),
             fmt::format("{} less {} kept back", q.device, gib(q.reserve_bytes))});
  return table;
}

TextTable sharding_table(const CapacityQuestion& q, const CapacityAnswer& answer) {
  std::vector<std::string> header = {"sharding", "recompute", "fewest devices", "per device"};
  if (q.devices > 0) header.push_back(fmt::format("per device at {}", q.devices));
  TextTable table(header);
  for (const ShardingFit& fit : answer.fits) {
    if (fit.recompute && !q.recomputation_known) continue;
    std::vector<std::string> row = {
        sharding_name(fit.sharding), fit.recompute ? "yes" : "no",
        fit.devices ? std::to_string(*fit.devices) : "none",
        fit.devices ? gib(fit.per_device_bytes)
                    : fmt::format("{} at {}", gib(fit.per_device_bytes), kMaxPlannedDevices)};
    if (q.devices > 0) {
      const double bytes = per_device_bytes(q.memory, fit.sharding, fit.recompute, q.devices);
      row.push_back(fmt::format("{} ({})", gib(bytes), bytes <= usable_bytes(q) ? "fits" : "no"));
    }
    table.add(row);
  }
  return table;
}

TextTable traffic_table(const CapacityQuestion& q, const CapacityAnswer& answer,
                        const std::vector<Link>& links) {
  std::vector<std::string> header = {"sharding", "devices", "sent per device per step"};
  for (const Link& link : links) header.push_back(link.name + ": extra per step");
  TextTable table(header);
  for (Sharding sharding : kShardings) {
    int devices = q.devices;
    if (devices < 2)
      for (const ShardingFit& fit : answer.fits)
        if (fit.sharding == sharding && !fit.recompute && fit.devices)
          devices = std::max(2, *fit.devices);
    if (devices < 2) devices = 8;
    const StepTraffic traffic = step_traffic(q.memory, sharding);
    const StepTraffic plain = step_traffic(q.memory, Sharding::replicated);
    const double share = (devices - 1.0) / devices;
    const double sent = share * (2 * traffic.all_reduce_bytes + traffic.reduce_scatter_bytes +
                                 traffic.all_gathers * traffic.all_gather_bytes);
    std::vector<std::string> row = {sharding_name(sharding), std::to_string(devices), gib(sent)};
    for (const Link& link : links) {
      const double extra =
          traffic_seconds(traffic, link, devices) - traffic_seconds(plain, link, devices);
      row.push_back(
          sharding == Sharding::replicated
              ? format_seconds(traffic_seconds(plain, link, devices)) + " (all-reduce)"
              : fmt::format("{}{}", extra < 0 ? "-" : "+", format_seconds(std::abs(extra))));
    }
    table.add(row);
  }
  return table;
}

TextTable peak_check_table(const std::vector<PeakCheck>& checks) {
  TextTable table({"backend", "workload", "predicted", "measured (timed peak)",
                   "measured / predicted", fmt::format("within {:.0f}%", kPeakTolerance * 100)});
  for (const PeakCheck& c : checks)
    table.add({c.backend, c.workload, gib(c.predicted_bytes), gib(c.measured_bytes),
               fmt::format("{:.3f}", c.ratio()),
               std::abs(c.ratio() - 1) <= kPeakTolerance ? "yes" : "NO"});
  return table;
}

bool peaks_within_tolerance(const std::vector<PeakCheck>& checks) {
  return std::all_of(checks.begin(), checks.end(),
                     [](const PeakCheck& c) { return std::abs(c.ratio() - 1) <= kPeakTolerance; });
}

}  // namespace tb
