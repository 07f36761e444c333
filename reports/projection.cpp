#include "reports/projection.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "reports/report.h"
#include "reports/result_record.h"
#include "workloads/descriptor.h"

namespace tb {
namespace {

// Relative least squares of t = alpha + g x with x scaled to [0, 1] (the normal equations
// otherwise mix 1 and 1e18): minimise sum ((alpha + g x_i) / t_i - 1)^2.
struct LineFit {
  double alpha = 0, slope = 0;
};
LineFit relative_least_squares(std::span<const SweepPoint> sweep, double scale) {
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (const SweepPoint& p : sweep) {
    const double a = 1 / p.seconds, b = p.bytes / scale / p.seconds;
    s11 += a * a, s12 += a * b, s22 += b * b, r1 += a, r2 += b;
  }
  const double det = s11 * s22 - s12 * s12;
  return {(r1 * s22 - r2 * s12) / det, (s11 * r2 - s12 * r1) / det / scale};
}

double rms_relative_residual(std::span<const SweepPoint> sweep, double alpha, double slope) {
  double sum = 0;
  for (const SweepPoint& p : sweep) sum += std::pow((alpha + slope * p.bytes) / p.seconds - 1, 2);
  return std::sqrt(sum / static_cast<double>(sweep.size()));
}

}  // namespace

std::optional<AlphaBetaFit> fit_alpha_beta(std::span<const SweepPoint> sweep,
                                           std::string* why_not) {
  std::vector<SweepPoint> points;
  for (const SweepPoint& p : sweep)
    if (p.bytes > 0 && p.seconds > 0) points.push_back(p);
  const auto [smallest, largest] = std::minmax_element(
      points.begin(), points.end(), [](auto& a, auto& b) { return a.bytes < b.bytes; });
  if (points.size() < kMinFitPoints || largest->bytes < kMinFitSpan * smallest->bytes) {
    *why_not = fmt::format(
        "too short to fit: {} size(s){}; latency and bandwidth need at least {} sizes spanning "
        "{:g}x or more",
        points.size(),
        points.empty()
            ? ""
            : fmt::format(" from {:.0f} to {:.0f} bytes", smallest->bytes, largest->bytes),
        kMinFitPoints, kMinFitSpan);
    return std::nullopt;
  }
  // Bandwidth from the large sizes (the gradients' regime: a sweep that leaves the caches bends
  // there), latency from the small ones with that bandwidth: alpha minimising
  // sum ((alpha + g x_i) / t_i - 1)^2 over them.
  std::vector<SweepPoint> large, small;
  for (const SweepPoint& p : points) {
    if (p.bytes * kFitRegimeSpan >= largest->bytes) large.push_back(p);
    if (p.bytes <= smallest->bytes * kFitRegimeSpan) small.push_back(p);
  }
  if (large.size() < 2) {
    *why_not =
        fmt::format("too short to fit: one size within {:g}x of the largest", kFitRegimeSpan);
    return std::nullopt;
  }
  LineFit line{0, relative_least_squares(large, largest->bytes).slope};
  if (!(line.slope > 0)) {
    *why_not = "the time does not grow with the size: no bandwidth to fit";
    return std::nullopt;
  }
  double num = 0, den = 0;
  for (const SweepPoint& p : small)
    num += (1 - line.slope * p.bytes / p.seconds) / p.seconds, den += 1 / (p.seconds * p.seconds);
  line.alpha = num / den;
  AlphaBetaFit fit;
  if (line.alpha < 0) line.alpha = 0, fit.alpha_clamped = true;
  fit.alpha_s = line.alpha;
  fit.beta_bytes_per_s = 1 / line.slope;
  fit.rms_relative_residual = rms_relative_residual(points, line.alpha, line.slope);
  fit.points = points.size();
  return fit;
}

double ring_all_reduce_seconds(const Link& link, int ranks, double bytes) {
  const double steps = 2.0 * (ranks - 1);
  return steps * link.alpha_s + steps / ranks * bytes / link.bytes_per_s;
}

Link measured_link(const AlphaBetaFit& fit, int world_size, std::string name) {
  const double steps = 2.0 * (world_size - 1);
  return {std::move(name), fit.alpha_s / steps, fit.beta_bytes_per_s * steps / world_size,
          fmt::format("fitted to the measured all-reduce at {} ranks", world_size)};
}

std::vector<Link> stated_links(double alpha_s) {
  // PCIe: GT/s per lane x 16 lanes x 128b/130b encoding / 8 bits (PCI-SIG base specifications
  // 4.0 and 5.0). NVLink 4: NVIDIA's H100 SXM figure, 900 GB/s both directions together.
  // InfiniBand: the signalling rate of one port (EDR 100 Gb/s, NDR 400 Gb/s).
  const double pcie_lanes_bytes = 16 * 128.0 / 130 / 8 * 1e9;
  return {
      {"PCIe 4.0 x16", alpha_s, 16 * pcie_lanes_bytes,
       "16 GT/s x 16 lanes, 128b/130b: 31.5 GB/s per direction, raw signalling"},
      {"PCIe 5.0 x16", alpha_s, 32 * pcie_lanes_bytes,
       "32 GT/s x 16 lanes, 128b/130b: 63.0 GB/s per direction, raw signalling"},
      {"NVLink 4", alpha_s, 450e9, "H100 SXM: 900 GB/s both directions = 450 GB/s per direction"},
      {"IB 100 Gb/s", alpha_s, 12.5e9, "InfiniBand EDR port: 100 Gb/s = 12.5 GB/s per direction"},
      {"IB 400 Gb/s", alpha_s, 50e9, "InfiniBand NDR port: 400 Gb/s = 50 GB/s per direction"},
  };
}

std::vector<Gradients> reference_gradients() {
  std::vector<Gradients> out;
  for (const auto& [name, parameters] : {std::pair{"1 B", 1e9}, {"10 B", 1e10}, {"175 B", 1.75e11}})
    for (const auto& [dtype, bytes] : {std::pair{"fp32", 4.0}, {"bf16", 2.0}})
      out.push_back({fmt::format("{} {}", name, dtype), parameters, bytes});
  return out;
}

DataParallelStep data_parallel_step(double step_s, double all_reduce_s, double hidden_fraction,
                                    int ranks) {
  const double step = step_s + all_reduce_s - std::min(hidden_fraction * all_reduce_s, step_s);
  return {ranks, all_reduce_s, step, step_s / step};
}

std::vector<int> projected_rank_counts() {
  std::vector<int> ranks;
  for (int n = 2; n <= 1024; n *= 2) ranks.push_back(n);
  return ranks;
}

namespace {

int world_size(const nlohmann::json& result) {
  const nlohmann::json& details = result.value("details", nlohmann::json::object());
  return details.is_object() ? details.value("world_size", 1) : 1;
}

std::vector<MeasuredSweep> all_reduce_sweeps(const std::vector<ResultRecord>& passed) {
  std::map<std::tuple<std::string, std::string, bool, int>, MeasuredSweep> sweeps;
  for (const ResultRecord& record : passed) {
    const nlohmann::json* r = record.json;
    const Descriptor d = Descriptor::parse((*r)["workload"].get<std::string>());
    const nlohmann::json& metrics = (*r)["metrics"];
    if (d.kind() != "allreduce" || !metrics.is_object() || !metrics.contains("seconds")) continue;
    const std::optional<std::int64_t> bytes = parse_integer(d.get("bytes").value_or(""));
    if (!bytes) continue;
    const std::string dtype = d.get("dtype").value_or((*r)["dtype"].get<std::string>());
    const bool inplace = d.get("inplace").value_or("0") == "1";
    MeasuredSweep& sweep = sweeps[{(*r)["backend"], dtype, inplace, world_size(*r)}];
    sweep.backend = (*r)["backend"], sweep.dtype = dtype, sweep.inplace = inplace;
    sweep.world_size = world_size(*r);
    sweep.points.push_back({static_cast<double>(*bytes), metrics["seconds"].get<double>()});
  }
  std::vector<MeasuredSweep> out;
  for (auto& [key, sweep] : sweeps) {
    std::sort(sweep.points.begin(), sweep.points.end(),
              [](auto& a, auto& b) { return a.bytes < b.bytes; });
    if (sweep.world_size < 2)
      sweep.why_not = "at world size 1 an all-reduce is a copy, not a fabric: run it under mpirun";
    else
      sweep.fit = fit_alpha_beta(sweep.points, &sweep.why_not);
    out.push_back(std::move(sweep));
  }
  return out;
}

// A training step (read by samples/s, not a time to train: a step time is what scales), as a
// model whose gradients a data-parallel step exchanges; null for any other result.
std::optional<MeasuredModel> measured_model(const ResultRecord& record) {
  const nlohmann::json& r = *record.json;
  const auto& headline = record.headline;
  const nlohmann::json details = r.value("details", nlohmann::json::object());
  if (!headline || headline->headline.metric != "samples_per_s" || !details.is_object() ||
      !details.contains("parameters"))
    return std::nullopt;
  const Descriptor d = Descriptor::parse(r["workload"].get<std::string>());
  const double parameters = details.at("parameters");
  MeasuredModel m{fmt::format("{}{} ({:.3g} M parameters)", d.kind(),
                              d.has("model") ? " " + *d.get("model") : "", parameters / 1e6),
                  r["backend"],
                  r["dtype"],
                  r["workload"],
                  parameters,
                  4 * parameters,
                  record.stats->median};
  if (!details.contains("data_parallel")) return m;
  // Across ranks: the world-size-1 step measured in the same run, the gradients it exchanged,
  // and how much of their all-reduce backward hid with overlap on.
  const nlohmann::json& dp = details["data_parallel"];
  m.step_s = dp.value("one_rank_step_s", m.step_s);
  m.gradient_bytes = dp.value("gradient_bytes", m.gradient_bytes);
  m.measured_ranks = dp.value("world_size", 0);
  if (dp.contains("overlap_on"))
    m.measured_efficiency = dp.at("overlap_on").at("scaling_efficiency");
  const double communication = dp.value("communication_s", 0.0);
  if (communication > 0 && dp.contains("overlap_on"))
    m.hidden_fraction = std::clamp(
        1 - dp.at("overlap_on").at("unhidden_communication_s").get<double>() / communication, 0.0,
        1.0);
  return m;
}

// One model per (backend, kind, dtype): a data-parallel result where there is one (it carries
// the world-size-1 step too), else the world-size-1 result.
std::vector<MeasuredModel> measured_models(const std::vector<ResultRecord>& passed) {
  std::map<std::tuple<std::string, std::string, std::string>, MeasuredModel> models;
  for (const ResultRecord& record : passed)
    if (std::optional<MeasuredModel> m = measured_model(record)) {
      auto [it, added] =
          models.try_emplace({m->backend, descriptor_kind(m->workload), m->dtype}, *m);
      if (!added && m->measured_ranks > it->second.measured_ranks) it->second = *m;
    }
  std::vector<MeasuredModel> out;
  for (auto& [key, m] : models) out.push_back(std::move(m));
  return out;
}

// Per backend, the sweep that stands for its fabric: fitted, f32 out of place first.
std::vector<Link> fabrics(const std::vector<MeasuredSweep>& sweeps) {
  std::map<std::string, const MeasuredSweep*> best;
  auto rank = [](const MeasuredSweep& s) {
    return std::tuple(s.dtype == "f32", !s.inplace, s.points.size());
  };
  for (const MeasuredSweep& s : sweeps)
    if (s.fit && (!best.count(s.backend) || rank(s) > rank(*best[s.backend]))) best[s.backend] = &s;
  std::vector<Link> out;
  for (const auto& [backend, s] : best)
    out.push_back(measured_link(*s->fit, s->world_size, fmt::format("measured {}", backend)));
  return out;
}

}  // namespace

CommunicationProjection project_communication(const nlohmann::json& report) {
  std::vector<ResultRecord> passed;
  for (ResultRecord& record : read_results(report))
    if (record.passed()) passed.push_back(std::move(record));
  CommunicationProjection projection;
  projection.sweeps = all_reduce_sweeps(passed);
  projection.fabrics = fabrics(projection.sweeps);
  projection.links =
      stated_links(projection.fabrics.empty() ? 0.0 : projection.fabrics.front().alpha_s);
  projection.models = measured_models(passed);
  return projection;
}

}  // namespace tb
