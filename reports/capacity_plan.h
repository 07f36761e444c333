// The capacity planner (`trainbench plan`): the memory training a model needs on one device,
// part by part, and what fits there: the whole model, the model only with its blocks
// recomputed, or the model sharded ZeRO-style across N devices, with the communication each
// sharding adds over a plain data-parallel step. A projection from counts (and from a measured
// step and collective sweep where a report has them), checked against measured peaks by
// check_peaks().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/training_memory.h"
#include "reports/projection.h"
#include "reports/text_table.h"

namespace tb {

// What each device keeps whole and what it holds a 1/N share of.
enum class Sharding {
  replicated,  // data parallel: everything on every device
  zero1,       // the optimizer state (and mixed precision's fp32 master weights) sharded
  zero2,       // ... and the gradients
  zero3,       // ... and the weights (FSDP's full sharding): gathered a layer at a time
};
std::string sharding_name(Sharding sharding);  // "ZeRO-1 (optimizer state)", ...
inline constexpr int kMaxPlannedDevices = 4096;

struct CapacityQuestion {
  std::string model;                // what is planned, as the output names it
  TrainingMemory memory;            // one device's micro-batch
  std::string activation_source;    // where the activations come from
  bool recomputation_known = true;  // false: activations_recomputed was not estimated
  double device_bytes = 0;          // one device's memory
  std::string device;               // where that figure comes from
  double reserve_bytes = 0;         // kept back for the runtime and libraries
  int devices = 0;                  // the devices at hand (0: not said)
};

// Each device's bytes at `devices` ways of `sharding`.
double per_device_bytes(const TrainingMemory& memory, Sharding sharding, bool recompute,
                        int devices);

// The bytes each device sends per step (ring collectives): replicated all-reduces the
// gradients; ZeRO-1 and -2 reduce-scatter them and all-gather the updated weights; ZeRO-3 also
// all-gathers the weights for backward.
struct StepTraffic {
  double reduce_scatter_bytes = 0, all_gather_bytes = 0;  // of the whole buffer, per step
  int all_gathers = 0;
  double all_reduce_bytes = 0;
};
StepTraffic step_traffic(const TrainingMemory& memory, Sharding sharding);
// The traffic's time over `link` at `devices` ring members (an all-gather or reduce-scatter is
// half a ring all-reduce).
double traffic_seconds(const StepTraffic& traffic, const Link& link, int devices);

struct ShardingFit {
  Sharding sharding = Sharding::replicated;
  bool recompute = false;
  std::optional<int> devices;   // the fewest that fit; null: none up to kMaxPlannedDevices
  double per_device_bytes = 0;  // at that count (at kMaxPlannedDevices where none fits)
};
struct CapacityAnswer {
  std::string verdict;  // fits / fits only with recomputation / needs N-way ... / cannot fit
  std::vector<ShardingFit> fits;  // every sharding, without and with recomputation
};
CapacityAnswer plan_capacity(const CapacityQuestion& question);

// The parts table, the sharding table and the communication table over `links` (for the
// fewest devices each sharding needs, or the devices at hand).
TextTable memory_parts_table(const CapacityQuestion& question);
TextTable sharding_table(const CapacityQuestion& question, const CapacityAnswer& answer);
TextTable traffic_table(const CapacityQuestion& question, const CapacityAnswer& answer,
                        const std::vector<Link>& links);

// A model case's predicted footprint against its measured allocator peak.
struct PeakCheck {
  std::string backend, workload;
  double predicted_bytes = 0, measured_bytes = 0;
  double ratio() const { return measured_bytes / predicted_bytes; }
};
// Measured within [1 - tolerance, 1 + tolerance] of predicted passes.
inline constexpr double kPeakTolerance = 0.10;
TextTable peak_check_table(const std::vector<PeakCheck>& checks);
bool peaks_within_tolerance(const std::vector<PeakCheck>& checks);

}  // namespace tb
