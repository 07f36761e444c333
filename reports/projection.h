// The communication projection `trainbench summary` prints (issue 21): latency and bandwidth
// (alpha-beta) fitted to a measured all-reduce sweep, the ring all-reduce model over that fabric
// and over stated link rates, and the data-parallel step time it implies for a measured model.
// A projection, never a measurement: it assumes a ring all-reduce, the overlap as measured (or
// its two bounds) and no congestion.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb {

struct SweepPoint {
  double bytes = 0;    // per-rank buffer, as nccl-tests prints it
  double seconds = 0;  // one all-reduce, the slowest rank's median
};

// time(bytes) = alpha + bytes / beta, one all-reduce at the sweep's world size.
struct AlphaBetaFit {
  double alpha_s = 0;           // the time of an empty all-reduce
  double beta_bytes_per_s = 0;  // the algorithm bandwidth a large one tends to
  // sqrt(mean(((fitted - measured) / measured)^2)) over the points: how well a line explains
  // the sweep (protocol switches between sizes show here).
  double rms_relative_residual = 0;
  std::size_t points = 0;
  bool alpha_clamped = false;  // the small sizes' alpha came out negative: set to 0
};

// Least squares on the relative error (each point's residual divided by its measured time), in
// two regimes: beta from the sizes within kFitRegimeSpan of the largest (the gradients' sizes;
// a sweep that falls out of the caches bends there, and a line through every size would take
// the cache's bandwidth), alpha from the sizes within kFitRegimeSpan of the smallest, with that
// beta. The residual is over every point. Needs kMinFitPoints sizes spanning kMinFitSpan;
// otherwise null, with why in *why_not.
inline constexpr std::size_t kMinFitPoints = 3;
inline constexpr double kMinFitSpan = 16;     // largest size / smallest
inline constexpr double kFitRegimeSpan = 64;  // each regime: a factor 64 of sizes
std::optional<AlphaBetaFit> fit_alpha_beta(std::span<const SweepPoint> sweep, std::string* why_not);

// One ring link: alpha per ring step, bandwidth per direction.
struct Link {
  std::string name;
  double alpha_s = 0;
  double bytes_per_s = 0;
  std::string rate;  // where the rate comes from
};

// Ring all-reduce of `bytes` per rank over `ranks`: 2(n-1) steps of latency, and each rank
// sends (and receives) 2(n-1)/n of the buffer (reduce-scatter, then all-gather).
//   T(n, S) = 2(n-1) alpha + 2(n-1)/n S / B
double ring_all_reduce_seconds(const Link& link, int ranks, double bytes);

// The measured fabric as a ring link: the fit's alpha spread over the ring's 2(n-1) steps, and
// B = beta 2(n-1)/n, the bus bandwidth nccl-tests reports. Needs world_size >= 2.
Link measured_link(const AlphaBetaFit& fit, int world_size, std::string name);

// The stated links at their raw signalling rate per direction (no protocol overhead: real
// all-reduces reach less, so these times are lower bounds), each with the given per-step alpha.
std::vector<Link> stated_links(double alpha_s);

// A gradient exchanged each step.
struct Gradients {
  std::string name;  // "10 B bf16", "resnet50-train (25.6 M)"
  double parameters = 0;
  double bytes_per_parameter = 4;
  double bytes() const { return parameters * bytes_per_parameter; }
};
// 1 B, 10 B and 175 B parameters, each in fp32 and bf16.
std::vector<Gradients> reference_gradients();

// A data-parallel step at `ranks`: the measured per-rank step, plus the all-reduce, minus the
// part of it backward hides (a fraction of the all-reduce, at most the step itself):
//   step(n) = t + T(n) - min(f T(n), t), efficiency = t / step(n)
struct DataParallelStep {
  int ranks = 0;
  double all_reduce_s = 0, step_s = 0, efficiency = 0;
};
DataParallelStep data_parallel_step(double step_s, double all_reduce_s, double hidden_fraction,
                                    int ranks);

// What the summary projects from a report.
struct MeasuredSweep {
  std::string backend, dtype;
  bool inplace = false;
  int world_size = 0;
  std::vector<SweepPoint> points;  // ascending bytes
  std::optional<AlphaBetaFit> fit;
  std::string why_not;  // when fit is null
};
struct MeasuredModel {
  std::string name, backend, dtype, workload;
  double parameters = 0;
  double gradient_bytes = 0;  // exchanged per step: as a data-parallel result says, else fp32
  double step_s = 0;          // per-rank step at world size 1
  // Of the all-reduce, the part backward hid, 1 - unhidden / communication, from a data-parallel
  // result (details.data_parallel: communication_s, overlap_on.unhidden_communication_s); null:
  // not measured.
  std::optional<double> hidden_fraction = std::nullopt;
  int measured_ranks = 0;  // that result's world size and scaling efficiency (overlap on)
  double measured_efficiency = 0;
};
struct CommunicationProjection {
  std::vector<MeasuredSweep> sweeps;  // every all-reduce sweep in the report
  std::vector<Link> fabrics;  // one per backend with a fitted sweep (f32 out of place first)
  std::vector<Link> links;    // stated_links(), with the first fabric's alpha
  std::vector<MeasuredModel> models;
};

// Passed `allreduce` results grouped into sweeps by (backend, dtype, inplace, world size):
// descriptor keys bytes, dtype, inplace; metric seconds; details.world_size.
CommunicationProjection project_communication(const nlohmann::json& report);

// The ranks the data-parallel table covers: 2, 4, ..., 1024.
std::vector<int> projected_rank_counts();
// The ranks the gradient table is shown at: one 8-GPU server.
inline constexpr int kGradientTableRanks = 8;

}  // namespace tb
