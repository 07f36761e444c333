#include "reports/summary.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "backends/status.h"
#include "models/step_breakdown.h"
#include "reports/compare.h"
#include "reports/projection.h"
#include "reports/report.h"
#include "reports/result_record.h"
#include "workloads/descriptor.h"

namespace tb {
namespace {

// ResNet-50 to 75.9% top-1: about 35 epochs of ImageNet's 1,281,167 images at batch
// 1,632-3,264 (LARS); 50,000 validation images every 4 epochs (9 evaluations).
constexpr ProjectionRecipe kResnet50{
    "ResNet-50 on ImageNet-1k to 75.9% top-1", 35.0 * 1'281'167, 9.0 * 50'000,
    "35 epochs of 1,281,167 images (MLPerf's reference convergence at batch 1,632-3,264 with "
    "LARS), 9 evaluations of 50,000 images at a third of a training step's cost per image; "
    "measured at this batch with SGD, so the optimizer's share differs slightly; JPEG decoding "
    "and augmentation not included"};
// BERT-large to 0.720 masked-LM accuracy: about 2.55 M samples at batch 256 from MLPerf's
// checkpoint; 10,000 evaluation samples every 150,000 training samples (17 evaluations).
constexpr ProjectionRecipe kBertLarge{
    "BERT-large (phase 2, from MLPerf's checkpoint) to 0.720 masked-LM accuracy", 2.55e6,
    17.0 * 10'000,
    "2.55 M samples of length 512 (MLPerf's reference convergence at batch 256, LAMB), 17 "
    "evaluations of 10,000 samples at a third of a training step's cost; packing and data "
    "loading not included"};

std::string measured(const ResultRecord& record) {
  const std::string caveats = result_caveats(record);
  return fmt::format("{} {} {}: median {:.4g} s{}", record.key.backend, record.key.dtype,
                     record.key.workload, record.stats->median,
                     caveats.empty() ? "" : " " + caveats);
}

// The communication projection (reports/projection.h): what it assumes and its formula, said
// with every figure it gives.
constexpr const char* kCommunicationAssumptions =
    "ring all-reduce T(n, S) = 2(n-1) a + 2(n-1)/n S / B (n ranks, S gradient bytes per rank, a "
    "the per-step latency fitted to the measured sweep, B the link's rate per direction: the "
    "measured bus bandwidth or a stated raw signalling rate, so stated links' times are lower "
    "bounds); overlap with backward as measured, else its bounds (none, full); no congestion; "
    "the measured models' gradients as their data-parallel step exchanged them, else in fp32 (4 "
    "bytes per parameter)";

std::string format_bytes(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.3g} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.3g} MB", bytes / 1e6);
  return fmt::format("{:.3g} kB", bytes / 1e3);
}

std::string fit_text(const MeasuredSweep& s) {
  const std::string name = fmt::format("{} {}{} all-reduce at {} rank(s)", s.backend, s.dtype,
                                       s.inplace ? " in place" : "", s.world_size);
  if (!s.fit) return fmt::format("{}: {}", name, s.why_not);
  return fmt::format(
      "{}: alpha {}, beta {:.3g} GB/s (least squares on the relative error over {} sizes, "
      "{} to {}; rms residual {:.1f}%{})",
      name, format_seconds(s.fit->alpha_s), s.fit->beta_bytes_per_s / 1e9, s.fit->points,
      format_bytes(s.points.front().bytes), format_bytes(s.points.back().bytes),
      100 * s.fit->rms_relative_residual, s.fit->alpha_clamped ? "; alpha clamped to 0" : "");
}

// Every gradient exchanged over every link at kGradientTableRanks, in seconds.
std::vector<Gradients> projected_gradients(const CommunicationProjection& p) {
  std::vector<Gradients> gradients;
  for (const MeasuredModel& m : p.models)
    if (std::none_of(gradients.begin(), gradients.end(), [&](auto& g) { return g.name == m.name; }))
      gradients.push_back({m.name, m.parameters, m.gradient_bytes / m.parameters});
  for (Gradients& g : reference_gradients()) gradients.push_back(std::move(g));
  return gradients;
}

// The widely repeated claim: a 10 B-parameter model's gradients take over half a second per
// step over PCIe.
std::string pcie_claim(const CommunicationProjection& p) {
  std::vector<std::string> times;
  int over = 0;
  for (const Link& link : {p.links[0], p.links[1]})
    for (const Gradients& g : reference_gradients())
      if (g.parameters == 1e10) {
        const double t = ring_all_reduce_seconds(link, kGradientTableRanks, g.bytes());
        times.push_back(fmt::format("{} {}", g.name.substr(5), format_seconds(t)));
        over += t > 0.5;
        if (times.size() % 2 == 0) times.back() += " over " + link.name;
      }
  return fmt::format(
      "10 B parameters at {} ranks: {}; the claim that this takes over half a second per step "
      "over PCIe holds in {} of these 4 cases (at the raw link rate: real links take longer)",
      kGradientTableRanks, fmt::join(times, ", "), over);
}

TextTable gradient_table(const CommunicationProjection& p, nlohmann::json* data) {
  std::vector<Link> links = p.fabrics;
  links.insert(links.end(), p.links.begin(), p.links.end());
  std::vector<std::string> header = {"gradients", "bytes"};
  for (const Link& link : links) header.push_back(link.name);
  TextTable table(header);
  for (const Gradients& g : projected_gradients(p)) {
    std::vector<std::string> row = {g.name, format_bytes(g.bytes())};
    nlohmann::json seconds = nlohmann::json::object();
    for (const Link& link : links) {
      seconds[link.name] = ring_all_reduce_seconds(link, kGradientTableRanks, g.bytes());
      row.push_back(format_seconds(seconds[link.name]));
    }
    table.add(row);
    data->push_back({{"gradients", g.name}, {"bytes", g.bytes()}, {"seconds", seconds}});
  }
  return table;
}

// One measured model's data-parallel step over a fabric, 2 to 1,024 ranks.
TextTable data_parallel_table(const MeasuredModel& m, const Link& fabric, nlohmann::json* rows) {
  std::vector<std::string> header = {"ranks",      "all-reduce",         "step, no overlap",
                                     "efficiency", "step, full overlap", "efficiency"};
  if (m.hidden_fraction) {
    header.push_back(fmt::format("step, {:.0f}% hidden (measured)", 100 * *m.hidden_fraction));
    header.push_back("efficiency");
  }
  TextTable table(header);
  for (int ranks : projected_rank_counts()) {
    const double all_reduce = ring_all_reduce_seconds(fabric, ranks, m.gradient_bytes);
    std::vector<std::string> row = {std::to_string(ranks), format_seconds(all_reduce)};
    nlohmann::json json_row = {{"ranks", ranks}, {"all_reduce_s", all_reduce}};
    for (const auto& [name, hidden] :
         {std::pair<const char*, std::optional<double>>{"no_overlap", 0.0},
          {"full_overlap", 1.0},
          {"measured_overlap", m.hidden_fraction}}) {
      if (!hidden) continue;
      const DataParallelStep step = data_parallel_step(m.step_s, all_reduce, *hidden, ranks);
      row.push_back(format_seconds(step.step_s));
      row.push_back(fmt::format("{:.1f}%", 100 * step.efficiency));
      json_row[name] = {{"step_s", step.step_s}, {"efficiency", step.efficiency}};
    }
    table.add(row);
    rows->push_back(json_row);
  }
  return table;
}

nlohmann::json link_json(const Link& link) {
  return {{"name", link.name},
          {"alpha_s", link.alpha_s},
          {"gbps", link.bytes_per_s / 1e9},
          {"rate", link.rate}};
}

// The data-parallel tables of every measured model, each over its own backend's fabric (the
// first fabric where its backend measured none).
void add_data_parallel(const CommunicationProjection& p, Answer* a) {
  for (const MeasuredModel& m : p.models) {
    const Link* fabric = &p.fabrics.front();
    for (const Link& f : p.fabrics)
      if (f.name == "measured " + m.backend) fabric = &f;
    nlohmann::json rows = nlohmann::json::array();
    a->tables.push_back(data_parallel_table(m, *fabric, &rows));
    const std::string measured =
        m.measured_ranks ? fmt::format("; measured at {} ranks: {:.1f}% efficiency with overlap",
                                       m.measured_ranks, 100 * m.measured_efficiency)
                         : "";
    a->titles.push_back(fmt::format(
        "Data-parallel step of {} {} [{}] over {} ({} per rank at 1 rank, {} of gradients{}), by "
        "ranks:",
        m.backend, m.name, m.dtype, fabric->name, format_seconds(m.step_s),
        format_bytes(m.gradient_bytes), measured));
    a->data["data_parallel"].push_back(
        {{"model", m.name},
         {"workload", m.workload},
         {"backend", m.backend},
         {"dtype", m.dtype},
         {"fabric", fabric->name},
         {"step_s", m.step_s},
         {"gradient_bytes", m.gradient_bytes},
         {"hidden_fraction",
          m.hidden_fraction ? nlohmann::json(*m.hidden_fraction) : nlohmann::json(nullptr)},
         {"rows", rows}});
  }
}

Answer communication_answer(const nlohmann::json& report) {
  Answer a{
      "Gradient all-reduce time and data-parallel scaling (a projection from the measured "
      "all-reduce sweep, not a measurement)",
      "",
      {}};
  const CommunicationProjection p = project_communication(report);
  std::vector<std::string> fits;
  for (const MeasuredSweep& s : p.sweeps) fits.push_back(fit_text(s));
  const std::string how =
      "measure one with `mpirun -np 2 trainbench run -b cpu-onednn -w 'allreduce "
      "sizes=8:1G:x2 dtype=f32'` (2 ranks or more; -b cuda for NCCL between GPUs)";
  if (p.fabrics.empty()) {
    a.answer = p.sweeps.empty() ? "not measured: no all-reduce sweep in this report; " + how
                                : fmt::format("not projected: {}; {}", fmt::join(fits, "; "), how);
    return a;
  }
  a.answer = fmt::format("{}. Fits: {}. Assumptions: {}", pcie_claim(p), fmt::join(fits, "; "),
                         kCommunicationAssumptions);
  a.data_key = "projection";
  a.data = {{"label", "projection"},
            {"assumptions", kCommunicationAssumptions},
            {"gradient_ranks", kGradientTableRanks},
            {"links", nlohmann::json::array()},
            {"gradients", nlohmann::json::array()},
            {"data_parallel", nlohmann::json::array()}};
  for (const Link& link : p.fabrics) a.data["links"].push_back(link_json(link));
  for (const Link& link : p.links) a.data["links"].push_back(link_json(link));
  a.tables.push_back(gradient_table(p, &a.data["gradients"]));
  std::vector<std::string> links;
  for (const nlohmann::json& l : a.data["links"])
    links.push_back(fmt::format("{}: B = {:.3g} GB/s, a = {} ({})", l["name"].get<std::string>(),
                                l["gbps"].get<double>(), format_seconds(l["alpha_s"]),
                                l["rate"].get<std::string>()));
  a.titles.push_back(fmt::format(
      "Gradient all-reduce at {} ranks (one 8-GPU server), T = 2(n-1) a + 2(n-1)/n S / B; links: "
      "{}:",
      kGradientTableRanks, fmt::join(links, "; ")));
  add_data_parallel(p, &a);
  for (const MeasuredSweep& s : p.sweeps)
    a.from.push_back(
        fmt::format("{} {} allreduce at {} rank(s), {} sizes: {} at {} to {} at {}", s.backend,
                    s.dtype, s.world_size, s.points.size(),
                    format_seconds(s.points.front().seconds), format_bytes(s.points.front().bytes),
                    format_seconds(s.points.back().seconds), format_bytes(s.points.back().bytes)));
  return a;
}

// A report's passed results, and the kind of device (cpu, gpu) each backend is.
struct Passed {
  std::vector<ResultRecord> results;
  std::map<std::string, std::string> device_kind;  // backend -> cpu / gpu
  std::string kind(const ResultRecord& r) const {
    const auto it = device_kind.find(r.key.backend);
    return it != device_kind.end() ? it->second : "";
  }
};

// GPU over CPU speed-up, per workload and dtype: the GPU against the fastest CPU backend.
Answer speedup_answer(const Passed& passed) {
  Answer speedup{"GPU over CPU speed-up per workload and dtype", "", {}};
  std::map<std::pair<std::string, std::string>, std::pair<const ResultRecord*, const ResultRecord*>>
      pairs;
  for (const ResultRecord& r : passed.results) {
    auto& [cpu, gpu] = pairs[{r.key.workload, r.key.dtype}];
    auto& slot = passed.kind(r) == "gpu" ? gpu : cpu;
    if (passed.kind(r) != "gpu" && passed.kind(r) != "cpu") continue;
    if (!slot || headline_ratio(r, *slot).value_or(0) > 1) slot = &r;
  }
  for (const auto& [key, pair] : pairs)
    if (pair.first && pair.second) {
      const std::optional<double> ratio = headline_ratio(*pair.second, *pair.first);
      if (!ratio) continue;
      speedup.answer += fmt::format("{}{:.1f}x for {} [{}]", speedup.answer.empty() ? "" : "; ",
                                    *ratio, key.first, key.second);
      speedup.from.push_back(measured(*pair.first));
      speedup.from.push_back(measured(*pair.second));
    }
  if (speedup.answer.empty())
    speedup.answer = "not measured: no case ran on both a GPU and a CPU backend";
  return speedup;
}

// Memory bandwidth: best STREAM figure on each kind of device.
Answer bandwidth_answer(const Passed& passed) {
  Answer bandwidth{"Memory-bandwidth ratio, GPU over CPU", "", {}};
  struct Stream {
    const ResultRecord* result;
    double gbps;
  };
  std::map<std::string, Stream> best_stream;  // device kind -> its fastest STREAM result
  for (const ResultRecord& r : passed.results) {
    const std::optional<double> gbps = r.metric("gbps");
    if (!r.headline || r.headline->headline.figure != kMemoryBandwidthFigure || !gbps) continue;
    const auto slot = best_stream.find(passed.kind(r));
    if (slot == best_stream.end() || *gbps > slot->second.gbps)
      best_stream.insert_or_assign(passed.kind(r), Stream{&r, *gbps});
  }
  for (const auto& [device, best] : best_stream)
    bandwidth.from.push_back(
        fmt::format("{}: {:.1f} GB/s ({})", device, best.gbps, measured(*best.result)));
  if (best_stream.count("gpu") && best_stream.count("cpu"))
    bandwidth.answer =
        fmt::format("{:.1f}x", best_stream.at("gpu").gbps / best_stream.at("cpu").gbps);
  else
    bandwidth.answer = fmt::format("not measured: STREAM ran on {}",
                                   best_stream.empty() ? "no device" : "one kind of device only");
  return bandwidth;
}

// Mixed precision: the same case in a low-precision dtype against fp32, same backend.
Answer mixed_precision_answer(const Passed& passed) {
  Answer mixed{"Mixed-precision speed-up and memory saving over fp32", "", {}};
  std::map<std::pair<std::string, std::string>, const ResultRecord*> by_workload;
  for (const ResultRecord& r : passed.results) by_workload[{r.key.backend, r.key.workload}] = &r;
  for (const ResultRecord& r : passed.results) {
    const std::string& dtype = r.key.dtype;
    const std::string tag = " dtype=" + dtype;
    if (dtype == "f32" || dtype == "f64" || r.key.workload.find(tag) == std::string::npos) continue;
    // A collective moves its bytes= in any dtype: its dtype trades no precision for speed.
    if (r.headline && r.headline->headline.metric == "busbw_gbps") continue;
    std::string fp32 = r.key.workload;
    fp32.replace(fp32.find(tag), tag.size(), " dtype=f32");
    const auto it = by_workload.find({r.key.backend, fp32});
    if (it == by_workload.end()) continue;
    const std::optional<double> ratio = headline_ratio(r, *it->second);
    if (!ratio) continue;
    const std::optional<double> bytes32 = it->second->metric("bytes"), bytes = r.metric("bytes");
    const std::string saving = bytes32 && bytes ? fmt::format(", {:.0f}% less memory traffic",
                                                              100 * (1 - *bytes / *bytes32))
                                                : "";
    mixed.answer += fmt::format("{}{} {:.2f}x{} ({} {})", mixed.answer.empty() ? "" : "; ", dtype,
                                *ratio, saving, r.key.backend, descriptor_kind(r.key.workload));
    mixed.from.push_back(measured(*it->second));
    mixed.from.push_back(measured(r));
  }
  if (mixed.answer.empty())
    mixed.answer = "not measured: no case ran in both fp32 and a lower precision";
  return mixed;
}

// The optimizer state per parameter a model case measured (details.optimizer), for AdamW.
std::optional<double> adamw_state_per_parameter(const ResultRecord& r) {
  const auto details = r.json->find("details");
  if (details == r.json->end() || !details->is_object()) return std::nullopt;
  const auto optimizer = details->find("optimizer");
  if (optimizer == details->end() || !optimizer->is_object() ||
      optimizer->value("kind", "") != "adamw")
    return std::nullopt;
  const auto bytes = optimizer->find("state_bytes_per_parameter");
  if (bytes == optimizer->end() || !bytes->is_number()) return std::nullopt;
  return bytes->get<double>();
}

// Training state per parameter with AdamW: the moments as the step measured them, with the fp32
// weights and gradients every step keeps (and the 16-bit weight copy of mixed precision).
Answer state_answer(const Passed& passed) {
  Answer state{"Training-state memory per parameter with AdamW", "", {}};
  std::set<std::string> said;  // one line per backend and dtype
  for (const ResultRecord& r : passed.results) {
    const std::optional<double> moments = adamw_state_per_parameter(r);
    if (!moments || !said.insert(r.key.backend + " " + r.key.dtype).second) continue;
    const bool mixed = r.key.dtype == "bf16" || r.key.dtype == "f16";
    state.answer += fmt::format(
        "{}{} [{}]: {:.1f} bytes of AdamW moments (measured), {:.1f} with the fp32 weights and "
        "gradients{}",
        state.answer.empty() ? "" : "; ", r.key.backend, r.key.dtype, *moments, *moments + 8,
        mixed ? fmt::format(" and the {} weight copy: {:.1f}", r.key.dtype, *moments + 10) : "");
    state.from.push_back(measured(r));
  }
  if (state.answer.empty())
    state.answer =
        "not measured in this report; by the AdamW state layout: fp32 16 bytes (weights 4, "
        "gradients 4, two moments 8); "
        "bf16 mixed precision with fp32 master weights 18 bytes (+2 for the bf16 weight copy), "
        "activations extra";
  return state;
}

// Projected full-scale time-to-train from measured training throughput: a projection,
// with its assumptions, never a measurement.
Answer projection_answer(const Passed& passed) {
  Answer projection{
      "Projected time-to-train per device (a projection from MLPerf's "
      "convergence points, not a measurement)",
      "",
      {}};
  std::map<std::string, const ProjectionRecipe*> used;
  for (const ResultRecord& r : passed.results) {
    const std::optional<double> rate = r.metric("samples_per_s");
    if (!rate) continue;
    const ProjectionRecipe* recipe = projection_recipe(Descriptor::parse(r.key.workload));
    if (!recipe) continue;
    const double seconds = projected_training_seconds(*recipe, *rate);
    projection.answer +=
        fmt::format("{}{} on {} [{}]: {:.1f} h ({:.3g} training samples at the measured {:.2f}/s)",
                    projection.answer.empty() ? "" : "; ", recipe->model, r.key.backend,
                    r.key.dtype, seconds / 3600, recipe->samples, *rate);
    projection.from.push_back(measured(r));
    used[recipe->model] = recipe;
  }
  for (const auto& [model, recipe] : used)
    projection.answer += fmt::format(". Assumptions for {}: {}", model, recipe->assumptions);
  if (projection.answer.empty())
    projection.answer =
        "not measured: no full-size ResNet-50 (224x224, 1000 classes) or "
        "BERT-large (length 512) training step in this report";
  return projection;
}

struct TimedLayer {
  double seconds = 0, spread = 0;  // forward + backward: median, interquartile range
  std::string name;
  bool operator>(const TimedLayer& other) const { return seconds > other.seconds; }
};

// "slowest layers a 12 ms (±1), b 9 ms (±1), ...": the first is named the slowest only where it
// leads the next by more than their spreads, else the leaders are said to be within noise.
std::string slowest_layers(std::vector<TimedLayer> layers) {
  constexpr std::size_t kLayersShown = 3;
  std::sort(layers.begin(), layers.end(), std::greater<>());
  std::string listed;
  for (std::size_t i = 0; i < std::min(kLayersShown, layers.size()); ++i)
    listed += fmt::format("{}{} {:.1f} ms (±{:.1f})", i ? ", " : "", layers[i].name,
                          layers[i].seconds * 1e3, layers[i].spread * 1e3 / 2);
  if (layers.size() < 2) return "slowest layer " + listed;
  if (slower_beyond_spread(layers[0].seconds, layers[0].spread, layers[1].seconds,
                           layers[1].spread))
    return fmt::format("slowest layer {} beyond the noise; then {}", layers[0].name, listed);
  return fmt::format(
      "no slowest layer beyond the noise: the leaders are within their spreads "
      "(median ± half the interquartile range over the instrumented steps): {}",
      listed);
}

// The layer whose product ops lose the most time in the step against the same ops alone
// (details.breakdown.layer_ceilings), or nothing where the breakdown has none.
std::string furthest_from_alone(const nlohmann::json& breakdown) {
  if (!breakdown.contains("layer_ceilings") ||
      !breakdown.at("layer_ceilings").contains("furthest") ||
      breakdown.at("layer_ceilings").at("furthest").empty())
    return "";
  const nlohmann::json& layer = breakdown.at("layer_ceilings").at("furthest").at(0);
  return fmt::format(
      "; furthest from its ceiling: {} at {:.0f} GFLOP/s in the step, {:.0f} alone ({:.1f} ms "
      "lost)",
      layer.at("layer").get<std::string>(), layer.at("gflops").get<double>(),
      layer.at("alone_gflops").get<double>(), layer.at("lost_s").get<double>() * 1e3);
}

// Where a model step's time goes: the slowest layers over the instrumented steps.
Answer breakdown_answer(const Passed& passed) {
  Answer breakdown{
      "Where a training step's time goes (slowest layers, forward + backward)", "", {}};
  for (const ResultRecord& r : passed.results) {
    // details is free-form in the schema: at() throws for a missing entry (bad input) where
    // the const operator[] would read past the map.
    if (!r.json->contains("details") || !(*r.json)["details"].contains("breakdown")) continue;
    const nlohmann::json& b = (*r.json)["details"]["breakdown"];
    const double total = b.at("total_s").get<double>();
    std::map<std::string, double> by_kind;
    for (const auto& layer : b.at("layers"))
      by_kind[layer.value("kind", "layer")] +=
          layer.at("forward_s").get<double>() + layer.at("backward_s").get<double>();
    std::vector<std::pair<double, std::string>> kinds;
    for (const auto& [kind, seconds] : by_kind) kinds.emplace_back(seconds, kind);
    std::sort(kinds.begin(), kinds.end(), std::greater<>());
    std::string shares;
    for (const auto& [seconds, kind] : kinds)
      shares +=
          fmt::format("{}{} {:.0f}%", shares.empty() ? "" : ", ", kind, 100 * seconds / total);
    breakdown.answer += fmt::format("{}{} {} [{}]: step {:.0f} ms: {}, optimizer {:.0f} ms; {}{}",
                                    breakdown.answer.empty() ? "" : "; ", r.key.backend,
                                    descriptor_kind(r.key.workload), r.key.dtype, total * 1e3,
                                    shares, b.at("optimizer_s").get<double>() * 1e3,
                                    slowest_layers_of(b), furthest_from_alone(b));
    breakdown.from.push_back(measured(r));
  }
  if (breakdown.answer.empty())
    breakdown.answer = "not measured: no model training step in this report";
  return breakdown;
}

// Energy as the device's counters measured it over each case's timed runs: the headline per
// joule and the mean power, or why no case has a figure.
Answer energy_answer(const Passed& passed) {
  Answer energy{"Energy per unit of work, measured", "", {}};
  std::string why_none;
  nlohmann::json data = nlohmann::json::array();
  for (const ResultRecord& r : passed.results) {
    const std::optional<CaseEnergy> e = read_case_energy(*r.json);
    if (!e) continue;
    if (!e->joules) {
      if (why_none.empty()) why_none = fmt::format("{} ({})", e->unavailable, e->source);
      continue;
    }
    const std::string per_joule =
        e->per_joule ? fmt::format("{:.4g} {}, ", *e->per_joule, e->per_joule_unit) : "";
    energy.from.push_back(fmt::format("{}{:.1f} W over {:.1f} s ({}; {})", per_joule,
                                      e->average_w.value_or(0), e->seconds, e->source,
                                      measured(r)));
    data.push_back({{"workload", r.key.workload},
                    {"backend", r.key.backend},
                    {"dtype", r.key.dtype},
                    {"energy", to_json(*e)}});
  }
  if (!data.empty())
    energy.answer = fmt::format("measured for {} case{}", data.size(), data.size() == 1 ? "" : "s");
  else if (!why_none.empty())
    energy.answer = "not measured: " + why_none;
  else
    energy.answer = "not measured: no case in this report read an energy counter";
  energy.data = data;
  return energy;
}

}  // namespace

std::string slowest_layers_of(const nlohmann::json& breakdown) {
  std::vector<TimedLayer> layers;
  for (const auto& layer : breakdown.at("layers"))
    layers.push_back({layer.at("forward_s").get<double>() + layer.at("backward_s").get<double>(),
                      layer.value("spread_s", 0.0), layer.at("layer").get<std::string>()});
  return slowest_layers(std::move(layers));
}

const ProjectionRecipe* projection_recipe(const Descriptor& d) {
  if (d.kind() == "resnet50-train" && d.get("image") == "224" && d.get("width") == "64" &&
      d.get("classes") == "1000")
    return &kResnet50;
  if (d.kind() == "bert-train" && d.get("model") == "large" && d.get("seq") == "512")
    return &kBertLarge;
  return nullptr;
}

double projected_training_seconds(const ProjectionRecipe& recipe, double samples_per_s) {
  return (recipe.samples + recipe.evaluated_samples / 3.0) / samples_per_s;
}

bool answered(const Answer& answer) {
  return answer.answer.rfind("not ", 0) != 0;
}

std::vector<Answer> summary_answers(const nlohmann::json& report) {
  Passed passed;
  for (const auto& backend : report["backends"])
    if (backend["device"].is_object())
      passed.device_kind[backend["name"]] = backend["device"]["kind"];
  for (const ResultRecord& result : read_results(report))
    if (result.passed()) passed.results.push_back(result);
  return {speedup_answer(passed),       bandwidth_answer(passed),  mixed_precision_answer(passed),
          state_answer(passed),         projection_answer(passed), breakdown_answer(passed),
          communication_answer(report), energy_answer(passed)};
}

nlohmann::json headline_lines(const nlohmann::json& report, const Costs& costs) {
  nlohmann::json lines = nlohmann::json::array();
  const std::vector<ResultRecord> records = read_results(report);
  std::map<std::string, const ResultRecord*> best;  // "backend|figure" -> the best result
  for (const ResultRecord& result : records) {
    const auto& figure = result.headline;
    if (!figure || figure->headline.figure.empty()) continue;
    const std::string key = fmt::format("{}|{}", result.key.backend, figure->headline.figure);
    const auto slot = best.find(key);
    if (slot == best.end() ||
        (figure->headline.lower_is_better ? figure->value < slot->second->headline->value
                                          : figure->value > slot->second->headline->value))
      best.insert_or_assign(key, &result);
  }
  for (const auto& [key, result] : best) {
    const HeadlineValue& figure = *result->headline;
    const auto bar = key.find('|');
    nlohmann::json line = {{"backend", key.substr(0, bar)},
                           {"figure", key.substr(bar + 1)},
                           {"value", figure.value},
                           {"unit", figure.headline.unit}};
    // The power the case's counters measured, else the one given for the machine.
    const std::optional<CaseEnergy> energy = read_case_energy(*result->json);
    const bool measured_power = energy && energy->average_w;
    const std::optional<double> watts = measured_power ? energy->average_w : costs.watts;
    if (watts) {
      line["watts"] = *watts;
      line["watts_source"] = measured_power ? "measured (" + energy->source + ")" : "given";
    }
    if (figure.headline.lower_is_better) {  // a time-to-train: its cost and energy
      if (costs.price_per_hour) line["cost_usd"] = figure.value / 3600 * *costs.price_per_hour;
      if (watts) line["energy_kwh"] = figure.value * *watts / 3.6e6;
    } else {  // a throughput: per dollar (per hour of the machine) and per watt
      if (costs.price_per_hour) line["per_usd_per_hour"] = figure.value / *costs.price_per_hour;
      if (watts) line["per_watt"] = figure.value / *watts;
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace tb
